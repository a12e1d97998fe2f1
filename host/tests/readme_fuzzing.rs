//! The README's *Fuzzing* section stays true: every fuzz target is in its
//! table, every bounded test it names exists, and every target it says
//! shares the checks of a bounded test includes a file of the test folders.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fuzzing_section() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let start = readme.find("## Fuzzing").expect("a Fuzzing section");
    let rest = &readme[start + 2..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i);
    rest[..end].to_owned()
}

#[test]
fn every_fuzz_target_is_listed_and_every_named_test_exists() {
    let section = fuzzing_section();
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(root().join("fuzz/fuzz_targets")).expect("fuzz targets") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            section.contains(&format!("| `{name}` |")),
            "fuzz target {name} is not in the README's table"
        );
        targets.push((name, path));
    }
    assert!(targets.len() >= 7, "{targets:?}");
    let mut named = Vec::new();
    for word in section.split('`') {
        if word.ends_with(".rs") && word.contains('/') {
            let text = std::fs::read_to_string(root().join(word))
                .unwrap_or_else(|_| panic!("README names {word}, which is not there"));
            named.push(text);
        }
    }
    // A target's checks shared with a bounded test: that test is named, so
    // a reader knows what CI runs in the target's place.
    for (name, path) in &targets {
        let text = std::fs::read_to_string(path).expect("target source");
        for line in text.lines() {
            let Some(included) = line.strip_prefix("#[path = \"../../") else {
                continue;
            };
            let included = included.trim_end_matches("\"]");
            let checks = Path::new(included);
            let stem = match checks.file_stem().and_then(|s| s.to_str()) {
                Some("mod") => checks.parent().and_then(|p| p.file_name()),
                _ => checks.file_stem(),
            }
            .and_then(|s| s.to_str())
            .expect("a file name")
            .to_owned();
            assert!(
                named.iter().any(|t| t.contains(&stem)),
                "fuzz target {name} shares {included}, but no bounded test the README names uses it"
            );
        }
    }
    // "The `a`, `b` … targets make the very checks of …": each includes a
    // checks file from a test folder.
    let claim = section
        .split("The `")
        .nth(1)
        .and_then(|s| s.split(" targets make the very checks").next())
        .expect("the sentence on shared checks");
    for name in claim
        .split('`')
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
    {
        if name.is_empty() {
            continue;
        }
        let (_, path) = targets
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("README names a target {name} that does not exist"));
        let text = std::fs::read_to_string(path).expect("target source");
        assert!(
            text.contains("#[path = \"../../") && text.contains("/tests/"),
            "fuzz target {name} does not include checks from a test folder"
        );
    }
}
