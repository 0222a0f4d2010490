//! Every fuzz target's seeds (`fuzz/seeds/<target>/`) through its `check`,
//! one test a seed, named `<target>/<seed>`: the inputs that once broke a
//! property, and the examples each target starts from, tried on every
//! `cargo test`.
//!
//! Two more tests hold the three lists of targets to `TARGETS`: the seed
//! directories (`targets/seeded`) and the cargo-fuzz binaries with their
//! one-line drivers (`targets/fuzzed`). A target missing from one of them
//! would go untried there without a word.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use shortlink_properties::TARGETS;

fn main() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let targets: BTreeSet<&'static str> = TARGETS.iter().map(|&(name, _)| name).collect();
    let mut trials = Vec::new();
    let mut seeded = BTreeSet::new();
    let mut strays = Vec::new();
    for dir in entries(&fuzz.join("seeds")) {
        let name = file_name(&dir);
        let Some(&(target, check)) = TARGETS.iter().find(|&&(target, _)| target == name) else {
            strays.push(name);
            continue;
        };
        for seed in entries(&dir) {
            seeded.insert(target);
            let name = format!("{target}/{}", file_name(&seed));
            trials.push(Trial::test(name, move || {
                let data =
                    fs::read(&seed).map_err(|e| format!("cannot read {}: {e}", seed.display()))?;
                check(&data);
                Ok(())
            }));
        }
    }
    let unseeded: Vec<&str> = targets.difference(&seeded).copied().collect();
    trials.push(Trial::test("targets/seeded", move || {
        problems(
            &strays
                .iter()
                .map(|stray| {
                    format!(
                        "fuzz/seeds/{stray}/ holds seeds of no target in \
                         shortlink_properties::TARGETS: rename or remove it"
                    )
                })
                .chain(unseeded.iter().map(|target| {
                    format!(
                        "{target} has no seeds in fuzz/seeds/{target}/: add one, so that \
                         cargo test tries it"
                    )
                }))
                .collect::<Vec<_>>(),
        )
    }));
    trials.push(Trial::test("targets/fuzzed", move || {
        problems(&fuzz_problems(&fuzz, &targets)?)
    }));
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

/// What keeps fuzz/'s binaries from being exactly `targets`, each
/// `fuzz_targets/<target>.rs` driving `shortlink_properties::<target>::check`.
fn fuzz_problems(fuzz: &Path, targets: &BTreeSet<&str>) -> Result<Vec<String>, Failed> {
    let manifest = fs::read_to_string(fuzz.join("Cargo.toml"))
        .map_err(|e| format!("cannot read fuzz/Cargo.toml: {e}"))?;
    let manifest: toml::Table = manifest
        .parse()
        .map_err(|e| format!("fuzz/Cargo.toml does not parse: {e}"))?;
    let binaries = manifest
        .get("bin")
        .and_then(toml::Value::as_array)
        .ok_or("fuzz/Cargo.toml declares no [[bin]]")?;
    let mut problems = Vec::new();
    let mut fuzzed = BTreeSet::new();
    for binary in binaries {
        let field = |name| binary.get(name).and_then(toml::Value::as_str).unwrap_or("");
        let (name, path) = (field("name"), field("path"));
        fuzzed.insert(name.to_owned());
        if !targets.contains(name) {
            problems.push(format!(
                "fuzz/Cargo.toml builds {name:?}, which is no target in \
                 shortlink_properties::TARGETS"
            ));
        }
        let expected = format!("fuzz_targets/{name}.rs");
        if path != expected {
            problems.push(format!(
                "the {name:?} binary's path is {path:?}, not {expected:?}"
            ));
            continue;
        }
        let driver = fs::read_to_string(fuzz.join(path)).unwrap_or_default();
        if !driver.contains(&format!("shortlink_properties::{name}::check(")) {
            problems.push(format!(
                "fuzz/{path} does not call shortlink_properties::{name}::check: each driver \
                 hands libFuzzer's input to its target's check alone"
            ));
        }
    }
    for target in targets.iter().filter(|target| !fuzzed.contains(**target)) {
        problems.push(format!(
            "fuzz/Cargo.toml has no [[bin]] for {target}: add one with path \
             fuzz_targets/{target}.rs"
        ));
    }
    for driver in entries(&fuzz.join("fuzz_targets")) {
        let name = file_name(&driver);
        let stem = name.strip_suffix(".rs").unwrap_or(&name);
        if !fuzzed.contains(stem) {
            problems.push(format!("fuzz/fuzz_targets/{name} is built by no [[bin]]"));
        }
    }
    Ok(problems)
}

fn problems(found: &[String]) -> Result<(), Failed> {
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("\n").into())
    }
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .expect("a named entry")
        .to_string_lossy()
        .into_owned()
}
