//! Scenario files come from users: any text given to `lockgrid run` is read
//! or refused with a one-line error, never a panic, and whatever is read
//! writes back to JSON that reads as the same scenario. The same holds for
//! the exact decimal readers behind every number in it.
//!
//! The cargo-fuzz targets `scenario` and `decimal` explore the same
//! properties without bounds; these runs are the ones CI executes.

mod text_checks;

use std::sync::OnceLock;

use lockgrid_host::scenario::Scenario;
use proptest::prelude::*;
use text_checks::{read_decimal, read_or_refuse};

/// The fixtures, as text, read once: edits of them keep most of a
/// scenario's shape.
fn fixtures() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        lockgrid_tests::scenario_fixtures()
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("fixture text"))
            .collect()
    })
}

/// Characters that keep an edited fixture JSON-like, so edits reach the
/// scenario's own checks rather than stopping at the first syntax error.
const PIECES: &[&str] = &[
    "0",
    "-1",
    "1e400",
    "0.5",
    "1e-9",
    "-0",
    "255",
    "4294967296",
    "18446744073709551616",
    "9223372036854775808",
    "1.00000762939453125",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "null",
    "true",
    "\"observer\"",
    "\"spawn\"",
    "\"move\"",
    "\"despawn\"",
    "\"id\"",
    "\"pos\"",
    "\"radius\"",
    "\"config\"",
    "\"max_view\"",
    "\"cell_size\"",
    "\\u0000",
    "\n",
    " ",
];

/// Numbers that land on and around the limits of the scenario's fields.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "0.5",
    "1e-9",
    "1e400",
    "-1e400",
    "65535",
    "65536",
    "255",
    "256",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "140737488355327.9999847412109375",
    "140737488355328",
    "-140737488355328",
    "0.00000762939453125",
    "2.5e2",
    "1E+2",
    "100.000000000000000000001",
];

#[derive(Debug, Clone)]
enum Edit {
    /// Replaces the n-th number of the text: the shape stays valid, so the
    /// edit reaches range checks and the config's validation.
    Number(prop::sample::Index, &'static str),
    Replace(prop::sample::Index, usize, &'static str),
    Insert(prop::sample::Index, &'static str),
    Cut(prop::sample::Index, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let piece = prop::sample::select(PIECES);
    prop_oneof![
        4 => (any::<prop::sample::Index>(), prop::sample::select(NUMBERS))
            .prop_map(|(i, n)| Edit::Number(i, n)),
        3 => (any::<prop::sample::Index>(), 1usize..8, piece.clone())
            .prop_map(|(i, n, p)| Edit::Replace(i, n, p)),
        2 => (any::<prop::sample::Index>(), piece).prop_map(|(i, p)| Edit::Insert(i, p)),
        1 => (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| Edit::Cut(i, n)),
    ]
}

/// Applies `edit` at a character boundary, so the text stays UTF-8.
fn apply(text: &mut String, edit: &Edit) {
    let at = |i: &prop::sample::Index, text: &String| {
        let mut k = i.index(text.len() + 1);
        while !text.is_char_boundary(k) {
            k -= 1;
        }
        k
    };
    let end = |from: usize, n: usize, text: &String| {
        let mut k = (from + n).min(text.len());
        while !text.is_char_boundary(k) {
            k += 1;
        }
        k
    };
    match edit {
        Edit::Number(i, n) => {
            let numbers = number_spans(text);
            if !numbers.is_empty() {
                let (from, to) = numbers[i.index(numbers.len())];
                text.replace_range(from..to, n);
            }
        }
        Edit::Replace(i, n, p) => {
            let from = at(i, text);
            let to = end(from, *n, text);
            text.replace_range(from..to, p);
        }
        Edit::Insert(i, p) => {
            let from = at(i, text);
            text.insert_str(from, p);
        }
        Edit::Cut(i, n) => {
            let from = at(i, text);
            let to = end(from, *n, text);
            text.replace_range(from..to, "");
        }
    }
}

/// Byte ranges of the numbers in JSON text (outside strings).
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let (mut spans, mut in_string, mut k) = (Vec::new(), false, 0);
    while k < bytes.len() {
        let b = bytes[k];
        if in_string {
            match b {
                b'\\' => k += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let from = k;
            while k < bytes.len()
                && matches!(bytes[k], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                k += 1;
            }
            spans.push((from, k));
            continue;
        }
        k += 1;
    }
    spans
}

/// Decimal-looking text: signs, digits, points and exponents of any length.
fn decimal_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?[0-9]{0,30}(\\.[0-9]{0,30})?([eE][-+]?[0-9]{0,22})?",
        "[-+0-9.eE]{0,24}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn edited_fixtures_are_read_or_refused_in_one_line(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let fixtures = fixtures();
        let mut text = fixtures[which.index(fixtures.len())].clone();
        for e in &edits {
            apply(&mut text, e);
        }
        read_or_refuse(&text);
    }

    #[test]
    fn decimal_text_is_read_exactly_or_refused(text in decimal_text()) {
        read_decimal(&text);
    }
}

#[test]
fn every_fixture_reads_and_round_trips() {
    for text in fixtures() {
        assert!(Scenario::from_json_str(text).is_ok());
        read_or_refuse(text);
    }
}
