"""Temporal assertions: Signal Temporal Logic on a run log's columns, with quantitative robustness.

A target file states them as ``[[verdict.assert]]`` tables (hil.logs.targets)::

    [[verdict.assert]]
    name = "brake_holds_torque"
    formula = "always (brake_elbow >= 1 implies abs(tau_elbow) <= 300)"
    requirement = { id = "REQ-DRV-007", text = "the elbow torque stays below 300 N m while its brake holds" }

Syntax (precedence from loose to tight)::

    formula     := disjunction ["implies" formula]
    disjunction := conjunction {"or" conjunction}
    conjunction := unary {"and" unary}
    unary       := "not" unary | "always" [interval] unary | "eventually" [interval] unary
                 | "rise" "(" formula ")" | "fall" "(" formula ")" | comparison | "(" formula ")"
    interval    := "[" number "," (number | "inf") "]"          seconds, relative to now
    comparison  := expr ("<" | "<=" | ">" | ">=") expr
    expr        := term {("+" | "-") term};  term := factor {("*" | "/") factor}
    factor      := number | column | "-" factor | "(" expr ")" | "abs(" expr ")"
                 | "norm(" expr {"," expr} ")" | "final(" column ")"

A column is any column of the run log (``t``, ``q_elbow``, ``tau_elbow``, ``tip_x``, ``imu_gx``,
``brake_elbow``: the log's own names, SI units); ``final(x)`` is x's mean over the targets'
``final_window_s`` at the run's end (so ``norm(tip_x - final(tip_x), tip_y - final(tip_y),
tip_z - final(tip_z))`` is the tip's distance from where it comes to rest).

Semantics: the formula holds for the run when it holds at the first row. ``always[a, b] f`` holds
at t when f holds at every row in [t + a, t + b], ``eventually[a, b] f`` when at some row there
(no interval: [0, inf]); on a finite run a window is cut at the last row, and an empty one makes
``always`` hold and ``eventually`` fail. ``rise(f)`` holds at the rows where f turns true (not at
the first row), ``fall(f)`` where it turns false. ``a implies b`` is ``not a or b``.

Robustness (the verdict's value; the space robustness of Donze and Maler, References): how far
the run is inside (positive) or outside (negative) the formula: for ``x < c`` the margin c - x,
``not`` negates, ``and`` and ``always`` take the minimum, ``or`` and ``eventually`` the maximum,
``rise(f)`` at a row the minimum of f there and not f at the row before. Whether the run passes is
decided by the formula's truth with every comparison taken exactly (satisfied): at a threshold the
robustness is 0 either way (a 0/1 column compared with ``>= 1``); a NaN sample fails a comparison. The unit is the compared columns' where they share one, else none. The first
violation: where a formula that fails is ``always`` (or an ``and`` of them), the first row inside
its window at which its operand fails; else the first row.

Why not rtamt: its parser is generated for the ANTLR runtime 4.5 to 4.9 and fails with 4.10 and
later (rtamt issue #145), a pin that other tools' ANTLR needs break, and its offline monitor
evaluates sample by sample in Python; the sliding minima and maxima here are
numpy over a sparse table (O(n log n) per temporal operator), and the grammar stays small enough
to state on one page.

Limits: MAX_FORMULA_CHARS characters and MAX_NODES operators and operands per formula.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

MAX_FORMULA_CHARS = 2000
MAX_NODES = 200
TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
                   r"|(?P<op><=|>=|[<>+\-*/(),\[\]])|(?P<name>[A-Za-z_][A-Za-z0-9_]*))")
KEYWORDS = ("always", "eventually", "not", "and", "or", "implies", "rise", "fall", "abs", "norm", "final", "inf")
COMPARISONS = ("<", "<=", ">", ">=")


class FormulaError(ValueError):
    """A formula that does not parse: the message names the position and what was expected there."""


@dataclass(frozen=True)
class Node:
    op: str                      # "num", "col", "neg", "+", "-", "*", "/", "abs", "norm", "final", a comparison,
    args: tuple = ()             # "not", "and", "or", "implies", "always", "eventually", "rise", "fall"
    value: float = 0.0           # a number's value
    name: str = ""               # a column's name
    window: tuple[float, float] = (0.0, math.inf)


class _Parser:
    def __init__(self, text: str):
        if len(text) > MAX_FORMULA_CHARS:
            raise FormulaError(f"{len(text)} characters; at most {MAX_FORMULA_CHARS}")
        self.text, self.tokens, pos = text, [], 0
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                rest = text[pos:].lstrip()
                if not rest:
                    break
                raise FormulaError(f"at character {len(text) - len(rest) + 1}: unexpected {rest[:10]!r}")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i, self.nodes = 0, 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else ("end", "", len(self.text))

    def take(self, value: str | None = None, what: str = "") -> str:
        kind, text, at = self.peek()
        if value is not None and text != value or kind == "end":
            found = "the end" if kind == "end" else repr(text)
            raise FormulaError(f"at character {at + 1}: expected {what or repr(value)}, found {found}")
        self.i += 1
        return text

    def node(self, *a, **kw) -> Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise FormulaError(f"more than {MAX_NODES} operators and operands")
        return Node(*a, **kw)

    def formula(self) -> Node:
        left = self.disjunction()
        if self.peek()[1] == "implies":
            self.take()
            return self.node("implies", (left, self.formula()))
        return left

    def left(self, ops: tuple[str, ...], operand) -> Node:
        """operand {op operand}, left-associative, for each op in `ops`."""
        node = operand()
        while self.peek()[1] in ops:
            node = self.node(self.take(), (node, operand()))
        return node

    def disjunction(self) -> Node:
        return self.left(("or",), self.conjunction)

    def conjunction(self) -> Node:
        return self.left(("and",), self.unary)

    def unary(self) -> Node:
        word = self.peek()[1]
        if word == "not":
            self.take()
            return self.node("not", (self.unary(),))
        if word in ("always", "eventually"):
            self.take()
            window = self.interval() if self.peek()[1] == "[" else (0.0, math.inf)
            return self.node(word, (self.unary(),), window=window)
        if word in ("rise", "fall"):
            self.take()
            self.take("(")
            inner = self.formula()
            self.take(")")
            return self.node(word, (inner,))
        start = self.i
        try:
            return self.comparison()
        except FormulaError as as_comparison:
            if self.tokens[start:start + 1] and self.tokens[start][1] == "(":
                self.i = start + 1
                inner = self.formula()
                self.take(")")
                return inner
            raise as_comparison

    def interval(self) -> tuple[float, float]:
        self.take("[")
        lo = self.number("the interval's start in s")
        self.take(",", "','")
        if self.peek()[1] == "inf":
            self.take()
            hi = math.inf
        else:
            hi = self.number("the interval's end in s (or inf)")
        at = self.peek()[2]
        self.take("]", "']'")
        if not 0.0 <= lo <= hi:
            raise FormulaError(f"at character {at + 1}: expected an interval [a, b] with 0 <= a <= b, got [{lo:g}, {hi:g}]")
        return lo, hi

    def number(self, what: str) -> float:
        kind, text, at = self.peek()
        if kind != "number":
            raise FormulaError(f"at character {at + 1}: expected {what}, found {text or 'the end'!r}")
        self.take()
        return float(text)

    def comparison(self) -> Node:
        left = self.expr()
        op = self.peek()[1]
        if op not in COMPARISONS:
            at = self.peek()[2]
            raise FormulaError(f"at character {at + 1}: expected a comparison (<, <=, >, >=), found "
                               f"{self.peek()[1] or 'the end'!r}")
        self.take()
        return self.node(op, (left, self.expr()))

    def expr(self) -> Node:
        return self.left(("+", "-"), self.term)

    def term(self) -> Node:
        return self.left(("*", "/"), self.factor)

    def factor(self) -> Node:
        kind, text, at = self.peek()
        if kind == "number":
            self.take()
            return self.node("num", value=float(text))
        if text == "-":
            self.take()
            return self.node("neg", (self.factor(),))
        if text == "(":
            self.take()
            inner = self.expr()
            self.take(")")
            return inner
        if text in ("abs", "norm", "final"):
            return self.function(text)
        if kind == "name" and text not in KEYWORDS:
            self.take()
            return self.node("col", name=text)
        raise FormulaError(f"at character {at + 1}: expected a number, a column or a function, found "
                           f"{text or 'the end'!r}")

    def function(self, name: str) -> Node:
        self.take()
        self.take("(")
        if name == "final":
            kind, text, at = self.peek()
            if kind != "name" or text in KEYWORDS:
                raise FormulaError(f"at character {at + 1}: expected a column in final(), found {text or 'the end'!r}")
            self.take()
            self.take(")")
            return self.node("final", name=text)
        args = [self.expr()]
        while name == "norm" and self.peek()[1] == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        return self.node(name, tuple(args))


def parse(text: str) -> Node:
    """The formula's tree (FormulaError naming the position and what was expected)."""
    p = _Parser(text)
    if not p.tokens:
        raise FormulaError("empty; expected a formula")
    tree = p.formula()
    kind, rest, at = p.peek()
    if kind != "end":
        raise FormulaError(f"at character {at + 1}: expected the end (or and, or, implies), found {rest!r}")
    if tree.op in ("num", "col", "neg", "+", "-", "*", "/", "abs", "norm", "final"):
        raise FormulaError("expected a comparison or a temporal formula, found an expression")
    return tree


def columns(tree: Node) -> list[str]:
    """The log columns the formula reads, in order of first use."""
    out: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.op in ("col", "final") and node.name not in out:
            out.append(node.name)
        stack.extend(reversed(node.args))
    return out


def unit_of(tree: Node, unit: dict[str, str]) -> str:
    """The unit of the compared columns, where they share one (`unit`: column -> unit), else ""."""
    units = {unit.get(c, "") for c in columns(tree)}
    return units.pop() if len(units) == 1 else ""


@dataclass
class Trace:
    """The run's rows: its times and the columns a formula reads; final: each column's final value."""
    t: np.ndarray
    values: dict[str, np.ndarray]
    final: dict[str, float]


def robustness(tree: Node, trace: Trace) -> np.ndarray:
    """The formula's robustness at every row (module docstring)."""
    return _evaluate(tree, trace, False)


def satisfied(tree: Node, trace: Trace) -> np.ndarray:
    """Whether the formula holds at every row (1.0 or 0.0), the comparisons taken exactly: at a threshold
    (a 0/1 column compared with >= 1) the robustness is 0 and cannot tell; this can."""
    return _evaluate(tree, trace, True)


def _evaluate(tree: Node, trace: Trace, boolean: bool) -> np.ndarray:
    op, a = tree.op, tree.args
    if op == "num":
        return np.full(len(trace.t), tree.value)
    if op == "col":
        return trace.values[tree.name]
    if op == "final":
        return np.full(len(trace.t), trace.final[tree.name])
    if op in ("neg", "abs", "norm", "+", "-", "*", "/"):
        x = [_evaluate(arg, trace, False) for arg in a]       # arithmetic: values, in either mode
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if op == "neg":
                return -x[0]
            if op == "abs":
                return np.abs(x[0])
            if op == "norm":
                return np.sqrt(sum(v ** 2 for v in x))
            return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](x[0], x[1])
    if op in COMPARISONS:
        x, y = _evaluate(a[0], trace, False), _evaluate(a[1], trace, False)
        if boolean:
            return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op](x, y).astype(float)
        return y - x if op in ("<", "<=") else x - y
    sub = [_evaluate(arg, trace, boolean) for arg in a]
    negate = (lambda v: 1.0 - v) if boolean else np.negative
    if op == "not":
        return negate(sub[0])
    if op in ("and", "or"):
        return np.minimum(*sub) if op == "and" else np.maximum(*sub)
    if op == "implies":
        return np.maximum(negate(sub[0]), sub[1])
    if op in ("rise", "fall"):
        x = sub[0] if op == "rise" else negate(sub[0])
        before = np.concatenate([[0.0 if boolean else -math.inf], negate(x[:-1])])   # no rise at the first row
        return np.minimum(x, before)
    lo, hi = windows(trace.t, tree.window)
    if op == "always":
        return sliding(sub[0], lo, hi, np.minimum, 1.0 if boolean else math.inf)
    return sliding(sub[0], lo, hi, np.maximum, 0.0 if boolean else -math.inf)


def windows(t: np.ndarray, window: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per row i: the rows lo[i] <= j < hi[i] with t[i] + a <= t[j] <= t[i] + b (a relative tolerance of a
    millionth of a step for times that are sums of steps)."""
    eps = 1e-6 * (float(np.median(np.diff(t))) if len(t) > 1 else 1.0)
    return np.searchsorted(t, t + window[0] - eps, "left"), np.searchsorted(t, t + window[1] + eps, "right")


def sliding(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, pick, empty: float) -> np.ndarray:
    """pick (np.minimum or np.maximum: a NaN row makes its windows NaN, which fails) of x[lo[i]:hi[i]] for every i, `empty` where the window holds no row: a sparse
    table of the minima (maxima) of every run of 2^k rows, two overlapping runs per window."""
    n = len(x)
    table = [x]
    while 2 ** len(table) <= n:
        prev, half = table[-1], 2 ** (len(table) - 1)
        table.append(pick(prev[:-half], prev[half:]))
    size = hi - lo
    out = np.full(n, empty)
    has = size > 0
    k = np.zeros(n, dtype=np.int64)
    k[has] = np.floor(np.log2(size[has])).astype(np.int64)
    for level in np.unique(k[has]):
        rows = np.flatnonzero(has & (k == level))
        row = table[level]
        out[rows] = pick(row[lo[rows]], row[hi[rows] - 2 ** level])
    return out


def first_violation(tree: Node, trace: Trace) -> float | None:
    """The time of the first violation of a formula that fails at the first row (module docstring); None if it holds."""
    if satisfied(tree, trace)[0] == 1.0:
        return None
    return _violated_at(tree, trace, 0)


def _violated_at(tree: Node, trace: Trace, i: int) -> float:
    if tree.op == "always":
        lo, hi = windows(trace.t, tree.window)
        inner = satisfied(tree.args[0], trace)[lo[i]:hi[i]]
        bad = np.flatnonzero(inner != 1.0)
        return float(trace.t[lo[i] + bad[0]]) if bad.size else float(trace.t[i])
    if tree.op == "and":
        return min(_violated_at(a, trace, i) for a in tree.args if satisfied(a, trace)[i] != 1.0)
    return float(trace.t[i])
