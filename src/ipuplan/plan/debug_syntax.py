"""The Rust `Debug` syntax the compiler writes, as a tiny immutable syntax tree.

Grammar (whitespace is exactly one space where shown, as `{:?}` prints it)::

    term   := struct | call | list | atom
    struct := NAME " { " field (", " field)* " }" | NAME " {}"
    field  := NAME ": " term
    call   := NAME "(" term (", " term)* ")"
    list   := "[" (term (", " term)*)? "]"
    atom   := NAME | INTEGER

`parse_terms` reads a space-separated sequence of terms (operation strings such as
``Repeat 2 boundary``); `format_terms` prints it back. Printing is the exact inverse
of parsing: a string that does not print back identically is rejected, so nothing
is silently normalised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ipuplan.errors import SyntaxProblem


@dataclass(frozen=True)
class Atom:
    text: str

    @property
    def is_int(self) -> bool:
        return _INT.fullmatch(self.text) is not None


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[tuple[str, Term], ...]

    def get(self, key: str) -> Term:
        for name, value in self.fields:
            if name == key:
                return value
        raise KeyError(key)

    def replace(self, key: str, value: Term) -> Struct:
        if key not in {name for name, _ in self.fields}:
            raise KeyError(key)
        return Struct(self.name, tuple((n, value if n == key else v) for n, v in self.fields))


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Term, ...]


@dataclass(frozen=True)
class ListTerm:
    items: tuple[Term, ...]


Term = Atom | Struct | Call | ListTerm

_INT = re.compile(r"-?[0-9]+")
MAX_NESTING = 32
"""Deepest nesting of terms read (a layout nests 5 levels): deeper text is refused before it exhausts the stack."""
_TOKEN = re.compile(r"-?[0-9]+|[A-Za-z_][A-Za-z0-9_]*")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, message: str) -> SyntaxProblem:
        return SyntaxProblem(message, self.pos)

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.pos)

    def expect(self, literal: str) -> None:
        if not self.peek(literal):
            found = self.text[self.pos : self.pos + 12] or "end of text"
            raise self.fail(f"expected {literal!r}, found {found!r}")
        self.pos += len(literal)

    def token(self) -> str:
        match = _TOKEN.match(self.text, self.pos)
        if match is None:
            found = self.text[self.pos : self.pos + 12] or "end of text"
            raise self.fail(f"expected a name or number, found {found!r}")
        self.pos = match.end()
        return match.group()

    def term(self) -> Term:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.fail(f"nested more than {MAX_NESTING} levels deep")
        try:
            return self.inner_term()
        finally:
            self.depth -= 1

    def inner_term(self) -> Term:
        if self.peek("["):
            return ListTerm(self.sequence("[", "]"))
        name = self.token()
        if _INT.fullmatch(name):
            return Atom(name)
        if self.peek(" {"):
            return self.struct(name)
        if self.peek("("):
            return Call(name, self.sequence("(", ")"))
        return Atom(name)

    def struct(self, name: str) -> Struct:
        self.expect(" {")
        if self.peek("}"):
            self.expect("}")
            return Struct(name, ())
        self.expect(" ")
        fields = [self.field()]
        while self.peek(", "):
            self.expect(", ")
            fields.append(self.field())
        self.expect(" }")
        return Struct(name, tuple(fields))

    def field(self) -> tuple[str, Term]:
        key = self.token()
        self.expect(": ")
        return key, self.term()

    def sequence(self, open_: str, close: str) -> tuple[Term, ...]:
        self.expect(open_)
        if self.peek(close):
            self.expect(close)
            return ()
        items = [self.term()]
        while self.peek(", "):
            self.expect(", ")
            items.append(self.term())
        self.expect(close)
        return tuple(items)


def parse_terms(text: str) -> tuple[Term, ...]:
    """Parse a space-separated sequence of Debug terms, e.g. ``Convert LocalKernel``.

    >>> parse_terms("Repeat 2 boundary")
    (Atom(text='Repeat'), Atom(text='2'), Atom(text='boundary'))
    """
    reader = _Reader(text)
    terms = [reader.term()]
    while reader.peek(" "):
        reader.expect(" ")
        terms.append(reader.term())
    if reader.pos != len(text):
        raise reader.fail(f"unexpected {text[reader.pos : reader.pos + 12]!r}")
    result = tuple(terms)
    if format_terms(result) != text:
        raise SyntaxProblem("not in the canonical Debug spacing")
    return result


def parse_term(text: str) -> Term:
    """Parse exactly one Debug term.

    >>> parse_term("Some(3)")
    Call(name='Some', args=(Atom(text='3'),))
    """
    terms = parse_terms(text)
    if len(terms) != 1:
        raise SyntaxProblem(f"expected one term, found {len(terms)}")
    return terms[0]


def format_term(term: Term) -> str:
    """Print a term exactly as Rust's `{:?}` does.

    Lists, not generators, go to `join`: it builds a list from a generator first anyway.
    """
    if isinstance(term, Atom):
        return term.text
    if isinstance(term, ListTerm):
        return "[" + ", ".join([format_term(item) for item in term.items]) + "]"
    if isinstance(term, Call):
        return term.name + "(" + ", ".join([format_term(arg) for arg in term.args]) + ")"
    if not term.fields:
        return term.name + " {}"
    body = ", ".join([f"{key}: {format_term(value)}" for key, value in term.fields])
    return f"{term.name} {{ {body} }}"


def format_terms(terms: tuple[Term, ...]) -> str:
    return " ".join([format_term(term) for term in terms])


def as_int(term: Term, what: str) -> int:
    if isinstance(term, Atom) and term.is_int:
        return int(term.text)
    raise SyntaxProblem(f"{what} must be an integer, found {format_term(term)!r}")


def as_name(term: Term, what: str) -> str:
    if isinstance(term, Atom) and not term.is_int:
        return term.text
    raise SyntaxProblem(f"{what} must be a name, found {format_term(term)!r}")


def int_atom(value: int) -> Atom:
    return Atom(str(value))
