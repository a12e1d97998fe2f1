//! `lockgrid render nats://…/NAME --tick T` draws a cluster's world at a
//! tick straight from its stream: the same picture as rendering the data
//! folder `replay nats://… --export` writes, and errors name the world.

mod cluster_common;

use cluster_common::*;

#[test]
fn a_cluster_world_renders_as_its_exported_data_folder() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();

    // A world of a few ticks with NPCs, by one node that then stops.
    write_world(&url, "drawn", 6, &tmp.path().join("writer"));

    let world = format!("{url}/drawn");
    let (ok, from_stream, err) = lockgrid(&["render", &world, "--tick", "5"]);
    assert!(ok, "render of the stream fails: {err}");
    assert!(from_stream.starts_with("<svg"), "{from_stream}");
    assert!(from_stream.contains("tick 5"), "{from_stream}");

    let export = tmp.path().join("export");
    let (ok, out, err) = lockgrid(&["replay", &world, "--export", export.to_str().unwrap()]);
    assert!(ok, "export fails: {out}{err}");
    let (ok, from_folder, err) = lockgrid(&["render", export.to_str().unwrap(), "--tick", "5"]);
    assert!(ok, "render of the exported folder fails: {err}");
    assert_eq!(from_stream, from_folder);

    // Past the end: refused, and nothing names the temporary folder.
    let (ok, _, err) = lockgrid(&["render", &world, "--tick", "100000"]);
    assert!(!ok);
    assert!(err.contains("100000"), "{err}");
    assert!(!err.contains("lockgrid-replay-"), "{err}");
}
