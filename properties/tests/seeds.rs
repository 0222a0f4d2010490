//! Every fuzz target's seeds (`fuzz/seeds/<target>/`) through its `check`,
//! one test a seed, named `<target>/<seed>`: the inputs that once broke a
//! property, and the examples each target starts from, tried on every
//! `cargo test`.

use std::fs;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use shortlink_properties::TARGETS;

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
}

fn main() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
    let mut trials = Vec::new();
    for dir in entries(&seeds) {
        let target = dir
            .file_name()
            .expect("a named directory")
            .to_string_lossy()
            .into_owned();
        // Seeds of a target that no longer exists would go unreplayed.
        let Some(&(_, check)) = TARGETS.iter().find(|(name, _)| *name == target) else {
            panic!(
                "{} holds seeds of no target in shortlink_properties::TARGETS",
                dir.display()
            );
        };
        for seed in entries(&dir) {
            let name = format!(
                "{target}/{}",
                seed.file_name().expect("a named file").to_string_lossy()
            );
            trials.push(Trial::test(name, move || {
                let data = fs::read(&seed)
                    .map_err(|e| Failed::from(format!("cannot read {}: {e}", seed.display())))?;
                check(&data);
                Ok(())
            }));
        }
    }
    for (target, _) in TARGETS {
        assert!(
            trials
                .iter()
                .any(|trial| trial.name().starts_with(&format!("{target}/"))),
            "{target} has no seeds in {}: add one, so that cargo test tries it",
            seeds.display()
        );
    }
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}
