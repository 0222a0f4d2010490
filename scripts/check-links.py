#!/usr/bin/env python3
"""Fail on a broken relative link in any tracked Markdown file.

Checks every inline link and image (`[text](target)`, `![alt](target)`)
and every reference definition (`[name]: target`) outside code blocks and
code spans. A relative target must name a file or directory of the
repository; a `#anchor` (alone, or after a Markdown file) must name a
heading of that file, spelt as GitHub spells its anchors: lower case,
punctuation other than `-` and `_` dropped, spaces turned into `-`, and
`-1`, `-2`, ... added to repeated headings. Links with a scheme
(`https:`, `mailto:`) are left alone.

Checking every file (no arguments), it also fails on a decision record
(`docs/adr/*.md`) the README's list of decisions does not link to.

Usage: scripts/check-links.py [FILE.md ...]   (default: `git ls-files '*.md'`)
"""

import os
import re
import subprocess
import sys
import unicodedata
from urllib.parse import unquote

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading):
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    kept = []
    for char in text:
        if char in " -_":
            kept.append("-" if char == " " else char)
        elif unicodedata.category(char)[0] in "LNM":
            kept.append(char)
    return "".join(kept)


def blocks(text):
    """Yield (line number, line) for the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        yield number, line


_anchors = {}


def anchors(path):
    """Every anchor a Markdown file offers."""
    if path not in _anchors:
        seen = {}
        found = set()
        for _, line in blocks(read(path)):
            found.update(HTML_ANCHOR.findall(line))
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        _anchors[path] = found
    return _anchors[path]


def links(text):
    """Yield (line number, target) for each link outside code."""
    lines = list(blocks(text))
    # Join the prose so that a link's text may wrap; keep line numbers.
    joined = ""
    starts = []
    for number, line in lines:
        starts.append((len(joined), number))
        joined += line + "\n"
    prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), joined)

    def line_of(offset):
        number = starts[0][1] if starts else 1
        for start, line_number in starts:
            if start > offset:
                break
            number = line_number
        return number

    for match in INLINE.finditer(prose):
        yield line_of(match.start()), match.group(1)
    offset = 0
    for line in prose.split("\n"):
        match = REFERENCE.match(line)
        if match:
            yield line_of(offset), match.group(1)
        offset += len(line) + 1


_texts = {}


def read(path):
    """A Markdown file's text, read once however many checks need it."""
    if path not in _texts:
        with open(path, encoding="utf-8") as file:
            _texts[path] = file.read()
    return _texts[path]


def check(path):
    """The broken links of one Markdown file, as messages."""
    text = read(path)
    here = os.path.dirname(path)
    problems = []
    for number, target in links(text):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        name = os.path.relpath(path, ROOT)
        if file_part:
            resolved = os.path.normpath(
                os.path.join(ROOT, file_part.lstrip("/"))
                if file_part.startswith("/")
                else os.path.join(here, file_part)
            )
            if not os.path.exists(resolved):
                problems.append(f"{name}:{number}: {target}: no such file")
                continue
        else:
            resolved = path
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if unquote(anchor).lower() not in anchors(resolved):
                problems.append(f"{name}:{number}: {target}: no such heading")
    return problems


def unlisted_decisions(tracked):
    """The tracked decision records README.md does not link to, as messages."""
    linked = {os.path.normpath(target.partition("#")[0])
              for _, target in links(read(os.path.join(ROOT, "README.md")))}
    records = sorted(name for name in tracked if os.path.dirname(name) == os.path.join("docs", "adr"))
    return [f"README.md: lists no link to the decision {name}" for name in records if name not in linked]


def main(arguments):
    tracked = []
    if arguments:
        files = [os.path.abspath(argument) for argument in arguments]
    else:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.md"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
        tracked = [name for name in listed.split("\0") if name]
        files = [os.path.join(ROOT, name) for name in tracked]
    problems = []
    checked = 0
    for path in files:
        if os.path.isfile(path):
            checked += 1
            problems.extend(check(path))
    if not arguments:
        problems.extend(unlisted_decisions(tracked))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check-links: {len(problems)} problem(s) in {checked} file(s)", file=sys.stderr)
        return 1
    print(f"check-links: every relative link of {checked} Markdown file(s) resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
