//! `shortlink add`, `show`, `edit`, `delete` and `list`: one link at a
//! time, as an operator.

use shortlink_core::{Expiry, Owner};
use shortlink_writer::config::Domain;
use shortlink_writer::links::details::Tag;
use shortlink_writer::links::shortener::{Change, ListQuery, NewLink, Shortener, Written};
use shortlink_writer::links::store::{Inserted, Link};
use shortlink_writer::links::validate::format_expiry;

use super::{operator, AddArgs, Command, EditArgs};

/// Shortens one URL and prints its short link.
pub async fn add(shortener: &Shortener, new: &NewLink<'_>) -> Result<(), String> {
    let Written {
        outcome: inserted,
        purge_warning,
    } = shortener
        .create(new, None)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", shortener.link_url(inserted.link()));
    if let Inserted::Existing(_) = inserted {
        eprintln!("(this URL already had that short link)");
    }
    warn_purge(purge_warning);
    Ok(())
}

/// `add`, `show`, `edit`, `delete` and `list`: the commands that read or change
/// links, as an operator.
pub async fn manage(shortener: Shortener, command: Command) -> Result<(), String> {
    match command {
        Command::Add(args) => add_link(&shortener, args).await,
        Command::Show { key, domain } => {
            let domain = domain_named(&shortener, domain.as_deref())?;
            let (link, current) = shortener
                .show(domain, &key)
                .await
                .map_err(|e| e.to_string())?;
            print_link(&shortener, &link).await?;
            println!("etag        {}", current.etag());
            Ok(())
        }
        Command::Edit(args) => edit_link(&shortener, args).await,
        Command::Delete {
            key,
            domain,
            if_match,
        } => {
            let domain = domain_named(&shortener, domain.as_deref())?;
            let written = shortener
                .delete(&operator(), domain, &key, if_match.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            println!("deleted {key}: it answers 410 Gone from now on");
            warn_purge(written.purge_warning);
            Ok(())
        }
        Command::List {
            owner,
            domain,
            search,
            tag,
            limit,
            cursor,
        } => {
            let query = ListQuery {
                limit,
                cursor: cursor.as_deref(),
                search: search.as_deref(),
                owner: owner.as_deref(),
                domain: domain.as_deref(),
                tag: tag.as_deref(),
            };
            list(&shortener, &query).await
        }
        other => unreachable!("{other:?} is handled by main"),
    }
}

/// Prints a page of the links `query` names, and how to go on.
async fn list(shortener: &Shortener, query: &ListQuery<'_>) -> Result<(), String> {
    let listing = shortener
        .list(&operator(), query)
        .await
        .map_err(|e| e.to_string())?;
    for link in &listing.links {
        let record = &link.record;
        let targeting = &record.targeting;
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            link.key,
            record.url,
            record.expires.map_or_else(|| "-".to_owned(), format_expiry),
            record.owner.as_ref().map_or("-", Owner::as_str),
            link.domain,
            if targeting.is_empty() {
                "-".to_owned()
            } else {
                format!(
                    "{} rules, {} split",
                    targeting.rules().len(),
                    targeting.split().len()
                )
            },
        );
    }
    if let Some(next) = listing.next_cursor {
        let domain = query
            .domain
            .map(|domain| format!(" --domain {domain}"))
            .unwrap_or_default();
        eprintln!("more: shortlink list{domain} --cursor '{next}'");
    }
    Ok(())
}

/// The domain `name` names (the default one without a name).
fn domain_named<'s>(shortener: &'s Shortener, name: Option<&str>) -> Result<&'s Domain, String> {
    shortener.domain(name).map_err(|e| e.to_string())
}

/// `add`: creates the link and prints its short link.
async fn add_link(shortener: &Shortener, args: AddArgs) -> Result<(), String> {
    let AddArgs {
        url,
        key,
        expires_at,
        expired_url,
        max_clicks,
        domain,
        forward_query,
        no_forward_query,
        rules,
        split,
        valid_since,
        title,
        tags,
        crawlable,
    } = args;
    let (rules, split) = super::targeting(&rules, &split)?;
    let new = NewLink {
        url: &url,
        key: key.as_deref(),
        expires_at: expires_at.as_deref(),
        expired_url: expired_url.as_deref(),
        max_clicks,
        forward_query: super::forwarding(forward_query, no_forward_query),
        domain: domain.as_deref(),
        rules: &rules,
        split: &split,
        valid_since: valid_since.as_deref(),
        title: title.as_deref(),
        tags: &tags,
        crawlable,
        ..NewLink::default()
    };
    add(shortener, &new).await
}

/// `edit`: changes the link as an operator, and prints it.
async fn edit_link(shortener: &Shortener, args: EditArgs) -> Result<(), String> {
    let EditArgs {
        key,
        domain,
        url,
        expires_at,
        no_expiry,
        expired_url,
        no_expired_url,
        max_clicks,
        no_max_clicks,
        forward_query,
        no_forward_query,
        domain_forwards_query,
        rules,
        no_rules,
        split,
        no_split,
        valid_since,
        no_valid_since,
        title,
        no_title,
        tags,
        no_tags,
        crawlable,
        if_match,
    } = args;
    let domain = domain_named(shortener, domain.as_deref())?;
    let (rules, split) = super::targeting(&rules, &split)?;
    let replaced = |given: bool, remove: bool| (given || remove).then_some(());
    let change = Change {
        url: url.as_deref(),
        expires_at: change_of(expires_at.as_deref(), no_expiry),
        expired_url: change_of(expired_url.as_deref(), no_expired_url),
        max_clicks: change_of(max_clicks, no_max_clicks),
        forward_query: change_of(
            super::forwarding(forward_query, no_forward_query),
            domain_forwards_query,
        ),
        rules: replaced(!rules.is_empty(), no_rules).map(|()| rules.as_slice()),
        split: replaced(!split.is_empty(), no_split).map(|()| split.as_slice()),
        valid_since: change_of(valid_since.as_deref(), no_valid_since),
        title: change_of(title.as_deref(), no_title),
        tags: replaced(!tags.is_empty(), no_tags).map(|()| tags.as_slice()),
        crawlable,
    };
    let written = shortener
        .edit(&operator(), domain, &key, &change, if_match.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    print_link(shortener, &written.outcome.0).await?;
    warn_purge(written.purge_warning);
    Ok(())
}

/// A part of a change: `remove` it, set it to `value`, or leave it.
#[allow(clippy::option_option)]
fn change_of<T>(value: Option<T>, remove: bool) -> Option<Option<T>> {
    if remove {
        Some(None)
    } else {
        value.map(Some)
    }
}

async fn print_link(shortener: &Shortener, link: &Link) -> Result<(), String> {
    let details = shortener
        .details(std::slice::from_ref(link))
        .await
        .map_err(|e| e.to_string())?
        .pop()
        .unwrap_or_default();
    let record = &link.record;
    println!("domain      {}", link.domain);
    println!("key         {}", link.key);
    println!("url         {}", record.url);
    println!("short_url   {}", shortener.link_url(link));
    if let Some(expires) = record.expires {
        println!("expires_at  {}", format_expiry(expires));
    }
    if let Some(starts) = record.starts {
        println!("valid_since {}", format_expiry(starts));
    }
    if let Some(url) = &record.expired_url {
        println!("expired_url {url}");
    }
    if let Some(limit) = record.max_clicks {
        println!("max_clicks  {limit}");
    }
    if let Some(forward) = record.forward_query {
        println!("forward_query {forward}");
    }
    println!(
        "owner       {}",
        record.owner.as_ref().map_or("(none)", Owner::as_str)
    );
    // As `--rule` and `--split` take them, in order: rule 1 first.
    for (n, rule) in record.targeting.rules().iter().enumerate() {
        let text = rule.to_string();
        println!(
            "rule {:<6} {}",
            n + 1,
            text.strip_prefix('~').unwrap_or(&text)
        );
    }
    for (n, target) in record.targeting.split().iter().enumerate() {
        let text = target.to_string();
        println!(
            "split {:<5} {}",
            n + 1,
            text.strip_prefix('*').unwrap_or(&text)
        );
    }
    if let Some(title) = &details.title {
        println!("title       {}", title.as_str());
    }
    if !details.tags.is_empty() {
        let tags: Vec<&str> = details.tags.iter().map(Tag::as_str).collect();
        println!("tags        {}", tags.join(", "));
    }
    if details.crawlable {
        println!("crawlable   true");
    }
    if let Some(created) = details.created.and_then(|unix| Expiry::try_from(unix).ok()) {
        println!("created_at  {}", format_expiry(created));
    }
    Ok(())
}

fn warn_purge(warning: Option<String>) {
    if let Some(warning) = warning {
        eprintln!("shortlink: warning: {warning}");
    }
}
