//! A lexer for the VCL this target compares: enough of VCL to tell code
//! from strings and comments, written apart from the generator so that
//! both sides of the comparison are read the same way.

use std::sync::LazyLock;

use regex::Regex;

/// A VCL file split into its code, with every number or placeholder as `0`
/// and every string or comment as a marker, its numbers, and its strings.
#[derive(Debug, Default)]
pub struct Lexed {
    pub skeleton: String,
    pub numbers: Vec<String>,
    pub literals: Vec<String>,
}

/// Placeholders, or numbers, in code.
static ATOM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("@[A-Z_]+@|[0-9]+").expect("a valid regex"));

/// `text` from the template, which must come out as it is: a placeholder
/// this target has no value for would make every input fail obscurely.
/// The per-domain placeholders of `sites` (`@NAME#index@`) count too.
pub fn known(text: &str) -> &str {
    static PLACEHOLDER: LazyLock<Regex> =
        LazyLock::new(|| Regex::new("@[A-Z_]+(#[0-9]+)?@").expect("a valid regex"));
    if let Some(name) = PLACEHOLDER.find(text) {
        panic!(
            "the template has a placeholder this fuzz target does not know, {}: \
             tell check() what value it stands for",
            name.as_str()
        );
    }
    text
}

/// The first line, numbered from 1, where two different texts differ, and
/// each one's line there (`None` past its end).
pub fn first_difference<'a>(
    got: &'a str,
    want: &'a str,
) -> (usize, Option<&'a str>, Option<&'a str>) {
    let lines = |text: &'a str| text.split('\n').map(Some).chain(std::iter::repeat(None));
    lines(got)
        .zip(lines(want))
        .enumerate()
        .find(|(_, (got, want))| got != want)
        .map(|(n, (got, want))| (n + 1, got, want))
        .expect("different texts differ in some line")
}

/// Lexes VCL's strings (`"…"` on one line, `{"…"}` and `"""…"""` on any) and
/// comments (`#` and `//` to the end of the line, `/* … */`). A long string
/// ends at the first `"}` after its `{"`, as Varnish reads it: a value that
/// holds one ends its string early, and the skeleton shows it.
pub fn lex(vcl: &str) -> Result<Lexed, String> {
    const TOKENS: [(&str, &str, bool); 6] = [
        ("\"\"\"", "\"\"\"", true),
        ("{\"", "\"}", true),
        ("\"", "\"", true),
        ("#", "\n", false),
        ("//", "\n", false),
        ("/*", "*/", false),
    ];
    let mut lexed = Lexed::default();
    let mut code_start = 0;
    let mut at = 0;
    while at < vcl.len() {
        let rest = &vcl[at..];
        let Some(&(open, close, is_string)) =
            TOKENS.iter().find(|(open, ..)| rest.starts_with(open))
        else {
            at += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        lexed.code(&vcl[code_start..at]);
        // Counted only for an error: counting at every token made the
        // lexer quadratic, and the runs ten times slower.
        let line = || vcl[..at].matches('\n').count() + 1;
        let body = &rest[open.len()..];
        let (content, closed) = match body.find(close) {
            Some(end) => (&body[..end], true),
            None => (body, false),
        };
        if is_string {
            if !closed {
                return Err(format!(
                    "the string opened at line {} is never closed",
                    line()
                ));
            }
            if open == "\"" && content.contains('\n') {
                return Err(format!(
                    "the string opened at line {} runs past its line",
                    line()
                ));
            }
            lexed.skeleton.push_str(open);
            lexed.skeleton.push('…');
            lexed.skeleton.push_str(close);
            lexed.literals.push(content.to_owned());
            at += open.len() + content.len() + close.len();
        } else {
            if !closed && close != "\n" {
                return Err(format!(
                    "the comment opened at line {} is never closed",
                    line()
                ));
            }
            lexed.skeleton.push_str("/*…*/");
            // The newline that ends a line comment is code.
            at += open.len() + content.len() + if close == "\n" { 0 } else { close.len() };
        }
        code_start = at;
    }
    lexed.code(&vcl[code_start..]);
    Ok(lexed)
}

impl Lexed {
    fn code(&mut self, code: &str) {
        for atom in ATOM.find_iter(code) {
            self.numbers.push(atom.as_str().to_owned());
        }
        let code = ATOM.replace_all(code, "0");
        // Indentation is not structure.
        let mut blank = false;
        for c in code.chars() {
            if c == ' ' || c == '\t' {
                if !blank {
                    self.skeleton.push(' ');
                }
                blank = true;
            } else {
                self.skeleton.push(c);
                blank = false;
            }
        }
    }
}
