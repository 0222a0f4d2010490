//! What each regex of the routes must match, tried with the regex crate,
//! which reads this much of PCRE (Varnish's dialect) the same way. The
//! regexes are judged by what they do, not by how they are spelled.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use regex::Regex;
use shortlink_core::{digest_key, MAX_KEY_LEN};

use super::sites::Site;

/// `pattern` compiled, from a cache: most configurations share their
/// regexes, and the same `Regex` keeps the lazy DFA its searches built,
/// where compiling anew (or cloning, which starts an empty cache) made each
/// run build it again, slowly enough under the sanitizer to hit the timeout.
fn compile(pattern: &str, context: &dyn Fn() -> String) -> Rc<Regex> {
    thread_local! {
        static CACHE: RefCell<HashMap<String, Rc<Regex>>> = RefCell::new(HashMap::new());
    }
    CACHE.with_borrow_mut(|cache| {
        if let Some(regex) = cache.get(pattern) {
            return Rc::clone(regex);
        }
        let regex = Regex::new(pattern)
            .unwrap_or_else(|e| panic!("the VCL regex {pattern:?} is invalid: {e}\n{}", context()));
        if cache.len() >= 1024 {
            cache.clear();
        }
        let regex = Rc::new(regex);
        cache.insert(pattern.to_owned(), Rc::clone(&regex));
        regex
    })
}

/// A domain's short-link regex must accept its link path followed by a
/// valid key (`min` to `MAX_KEY_LEN` key characters), perhaps with a query
/// or fragment after it, and nothing else.
pub fn check_key(pattern: &str, path: &str, min: usize, context: &dyn Fn() -> String) {
    let regex = compile(pattern, context);
    let digest = digest_key(path);
    let good = [
        "a".repeat(min),
        "Z9-_".repeat(MAX_KEY_LEN / 4),
        digest[..min].to_owned(),
    ];
    let bad = [
        "a".repeat(min - 1),
        "a".repeat(MAX_KEY_LEN + 1),
        format!("{}.", "a".repeat(min)),
        format!("{}/x", "a".repeat(min)),
        format!("{}/x?y", "a".repeat(min)),
        format!("{}.?x=1", "a".repeat(min)),
        format!("%2F{}", "a".repeat(min)),
    ];
    for key in &good {
        let url = format!("{path}{key}");
        for asked in [
            url.clone(),
            format!("{url}?x=1"),
            format!("{url}?"),
            format!("{url}#f"),
        ] {
            assert!(
                regex.is_match(&asked),
                "{pattern:?} refuses {asked:?}\n{}",
                context()
            );
        }
        for wrong in [format!("/x{url}"), format!("{url}\t")] {
            assert!(
                !regex.is_match(&wrong),
                "{pattern:?} accepts {wrong:?}\n{}",
                context()
            );
        }
        // A '.' in the path must match only itself.
        let dotless = url.replacen('.', "X", 1);
        assert!(
            dotless == url || !regex.is_match(&dotless),
            "{pattern:?} accepts {dotless:?}\n{}",
            context()
        );
    }
    for key in &bad {
        let url = format!("{path}{key}");
        assert!(
            !regex.is_match(&url),
            "{pattern:?} accepts {url:?}\n{}",
            context()
        );
    }
}

/// A domain's bare-domain regex must accept its link path alone, perhaps
/// with a query or fragment, and nothing under it.
pub fn check_bare(pattern: &str, path: &str, context: &dyn Fn() -> String) {
    let regex = compile(pattern, context);
    for url in [path.to_owned(), format!("{path}?x=1"), format!("{path}#f")] {
        assert!(
            regex.is_match(&url),
            "{pattern:?} refuses {url:?}\n{}",
            context()
        );
    }
    for url in [
        format!("{path}Lm25"),
        format!("{path}Lm25?x"),
        format!("/x{path}"),
    ] {
        assert!(
            !regex.is_match(&url),
            "{pattern:?} accepts {url:?}\n{}",
            context()
        );
    }
}

/// A domain's robots.txt regex must accept `<path>robots.txt`, perhaps
/// with a query, and no key nor anything else.
pub fn check_robots(pattern: &str, path: &str, context: &dyn Fn() -> String) {
    let regex = compile(pattern, context);
    for url in [format!("{path}robots.txt"), format!("{path}robots.txt?x=1")] {
        assert!(
            regex.is_match(&url),
            "{pattern:?} refuses {url:?}\n{}",
            context()
        );
    }
    for url in [
        format!("{path}Lm25"),
        format!("{path}robotsXtxt"),
        format!("{path}robots.txt2"),
        format!("/x{path}robots.txt"),
    ] {
        assert!(
            !regex.is_match(&url),
            "{pattern:?} accepts {url:?}\n{}",
            context()
        );
    }
}

/// The regex that claims a domain's requests must accept every path under
/// its link path, and nothing else.
pub fn check_path(pattern: &str, path: &str, context: &dyn Fn() -> String) {
    let regex = compile(pattern, context);
    for url in [path.to_owned(), format!("{path}Lm25"), format!("{path}?x")] {
        assert!(
            regex.is_match(&url),
            "{pattern:?} refuses {url:?}\n{}",
            context()
        );
    }
    let outside = [
        format!("/x{path}"),
        path.trim_end_matches('/').to_owned(),
        path.replacen('.', "X", 1),
    ];
    for url in outside.iter().filter(|url| !url.starts_with(path)) {
        assert!(
            !regex.is_match(url),
            "{pattern:?} accepts {url:?}\n{}",
            context()
        );
    }
}

/// A domain's Host regex must accept each of its names, in any case and
/// with any port, and nothing else: no other domain's name either, or the
/// first route would take that domain's links into the wrong key space.
pub fn check_host(pattern: &str, index: usize, sites: &[Site], context: &dyn Fn() -> String) {
    let regex = compile(pattern, context);
    let hosts = &sites[index].hosts;
    for host in hosts {
        for seen in [
            host.clone(),
            host.to_ascii_uppercase(),
            format!("{host}:8443"),
        ] {
            assert!(
                regex.is_match(&seen),
                "{pattern:?} refuses {seen:?}\n{}",
                context()
            );
        }
        let others = [
            format!("x{host}"),
            format!("{host}.evil.example"),
            format!("{host}:"),
            format!("{host}:80x"),
            host.replacen('.', "X", 1),
        ];
        for other in others.iter().filter(|other| !hosts.contains(other)) {
            assert!(
                !regex.is_match(other),
                "{pattern:?} accepts {other:?}\n{}",
                context()
            );
        }
    }
    let elsewhere = sites
        .iter()
        .enumerate()
        .filter(|(other, _)| *other != index);
    for other in elsewhere.flat_map(|(_, other)| &other.hosts) {
        assert!(
            hosts.contains(other) || !regex.is_match(other),
            "{pattern:?} accepts {other:?}, another domain's name\n{}",
            context()
        );
    }
}
