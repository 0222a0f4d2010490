//! A small country database in `MaxMind` DB format, shaped like `GeoIP2`
//! Country and DB-IP Country Lite, for tests of click enrichment.

use std::fs;
use std::path::Path;

use mmdb_writer::ipnet::IpNet;
use mmdb_writer::{Value, Writer};

/// Writes a country database to `path` that places each network of
/// `countries` (`("127.0.0.0/8", "NL")`) in that ISO 3166 country.
pub fn write_country_database(path: &Path, countries: &[(&str, &str)]) -> Result<(), String> {
    let mut writer = Writer::new("Shortlink-Test-Country");
    for &(network, iso_code) in countries {
        let network: IpNet = network
            .parse()
            .map_err(|e| format!("network {network}: {e}"))?;
        let record = Value::map([("country", Value::map([("iso_code", Value::from(iso_code))]))]);
        writer
            .insert_value(network, record)
            .map_err(|e| format!("network {network}: {e}"))?;
    }
    let bytes = writer.to_bytes().map_err(|e| e.to_string())?;
    fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}
