//! Golden outputs: small fixed scenarios that together touch every model
//! (RoCE with PFC and DCQCN, MRC with loss and trimming over SRv6, failures
//! and reconvergence, a collective job with dependencies, Clustermapper, a
//! pcap capture) are run and compared with their pinned results in
//! `tests/golden/*.json`: the whole summary, and every table and the pcap
//! by row count and digest. A refactoring must leave them unchanged; a
//! model change that moves them re-pins them in the same commit (run with
//! `FABRICSIM_BLESS=1`) and says in its message which model moved and why.

mod common;

use std::path::{Path, PathBuf};

use fabricsim_core::RunOutput;
use serde_json::{json, Map, Value};

/// FNV-1a, 64 bits: a stable digest that needs no dependency. It detects
/// change; nothing here needs it to resist forgery.
fn digest(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// What is pinned of a run: the summary in full, each table's shape and
/// digest, the pcap's size and digest.
fn pinned(out: &RunOutput) -> Value {
    let json = out.to_json();
    let mut tables = Map::new();
    for (name, table) in out.tables() {
        let rows = table.columns.first().map_or(0, |(_, c)| c.len());
        let text = json["tables"][name].to_string();
        tables.insert(
            name.to_string(),
            json!({"rows": rows, "dtypes": json["dtypes"][name], "digest": digest(text.as_bytes())}),
        );
    }
    let pcap = out.pcap.as_ref().map(|p| json!({"bytes": p.len(), "digest": digest(p)}));
    json!({"complete": out.complete, "summary": out.summary, "tables": tables, "pcap": pcap})
}

/// A value as its JSON text: floats parsed back need not be the same bits.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("serializable")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn check(name: &str) {
    let dir = golden_dir();
    let text = std::fs::read_to_string(dir.join(format!("{name}.yaml"))).expect("golden scenario");
    let scenario: Value = serde_yaml_ng::from_str(&text).expect("golden scenario is YAML");
    let actual = pinned(&common::run(scenario));
    let pinned_path = dir.join(format!("{name}.json"));
    let rendered = serde_json::to_string_pretty(&actual).expect("serializable") + "\n";
    if std::env::var_os("FABRICSIM_BLESS").is_some() {
        std::fs::write(&pinned_path, &rendered).expect("writable golden file");
        return;
    }
    let expected_text = std::fs::read_to_string(&pinned_path).unwrap_or_else(|_| {
        panic!("no pinned output {}: run with FABRICSIM_BLESS=1 to create it", pinned_path.display())
    });
    // Compared as text: a float parsed back need not be the same bits.
    if rendered != expected_text {
        let expected: Value = serde_json::from_str(&expected_text).expect("pinned output is JSON");
        // Both sides parsed back from text, so that a float's parsing does
        // not name a key that did not move.
        let actual: Value = serde_json::from_str(&rendered).expect("rendered output is JSON");
        let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("golden-{name}.json"));
        std::fs::write(&keep, &rendered).expect("writable target dir");
        let moved: Vec<String> = ["complete", "summary", "tables", "pcap"]
            .iter()
            .flat_map(|part| match (&actual[part], &expected[part]) {
                (Value::Object(a), Value::Object(e)) => {
                    let keys: std::collections::BTreeSet<&String> = a.keys().chain(e.keys()).collect();
                    keys.into_iter()
                        .filter(|k| a.get(*k).map(Value::to_string) != e.get(*k).map(Value::to_string))
                        .map(|k| format!("{part}.{k}"))
                        .collect()
                }
                (a, e) if json_text(a) != json_text(e) => vec![part.to_string()],
                _ => vec![],
            })
            .collect();
        panic!(
            "golden output of {name} moved: {}\nactual output kept in {}; diff it against {}",
            moved.join(", "),
            keep.display(),
            pinned_path.display()
        );
    }
}

#[test]
fn roce_incast_with_pfc_and_dcqcn() {
    check("roce_incast_pfc_dcqcn");
}

#[test]
fn mrc_with_loss_and_trimming_over_srv6() {
    check("mrc_loss_trim_srv6");
}

#[test]
fn link_failure_with_reconvergence() {
    check("link_failure_reconvergence");
}

#[test]
fn collective_job_with_dependencies() {
    check("collective_job");
}

#[test]
fn clustermapper_maps_dead_links_and_denies_their_paths() {
    check("clustermapper");
}

#[test]
fn pcap_capture_of_roce_frames() {
    check("pcap_roce");
}

/// Every scenario in the golden directory has a test above.
#[test]
fn every_golden_scenario_is_checked() {
    let source = include_str!("golden.rs");
    for entry in std::fs::read_dir(golden_dir()).expect("golden dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            assert!(source.contains(&format!("check(\"{stem}\")")), "{stem}.yaml has no golden test");
        }
    }
}
