//! Writes a small country database (`.mmdb`) for tests and the bench:
//! `country-database PATH NETWORK=CC...`, e.g.
//! `country-database countries.mmdb 127.0.0.0/8=NL 192.0.2.0/24=DE`.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, networks)) = args.split_first() else {
        eprintln!("usage: country-database PATH NETWORK=CC...");
        return ExitCode::from(2);
    };
    let mut countries = Vec::new();
    for network in networks {
        let Some(pair) = network.split_once('=') else {
            eprintln!("country-database: {network:?}: write NETWORK=CC, such as 127.0.0.0/8=NL");
            return ExitCode::from(2);
        };
        countries.push(pair);
    }
    match test_support::write_country_database(Path::new(path), &countries) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("country-database: {error}");
            ExitCode::FAILURE
        }
    }
}
