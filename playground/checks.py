"""The one helper per kind of value that enters the playground: whole numbers, real numbers, text, flags.

Every layer that takes a value from outside (a UI handler, a config, a CLI flag, a core function a notebook
calls) checks it here, so a wrong value gets the same message wherever it arrives. Knows nothing about
Gradio, argparse or torch; each refusal is a ``ValueError`` (or the ``error`` class a caller passes, such
as ``ConfigError``) whose message names the field and quotes the value, cut short:

    whole_number("2.5", "steps")          -> ValueError("steps must be a whole number, got '2.5'")
    whole_number(0, "heads_num", 1)       -> ValueError("heads_num must be positive, got 0")
    whole_number(4.0, "layers_num", 1)    -> 4        (number boxes send whole floats)
    text("x" * 3000, "The text", 2000)    -> ValueError("The text is 3,000 characters long; ...")
    flag("false", "greedy")               -> ValueError("greedy must be true or false, got 'false'")
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

SHOWN_CHARS = 60
# Every seed a visitor or a flag gives, in every tab: 0 to 2,147,483,647. A training run's batch seeds are built on
# it (train.batch_seed) and torch's CPU generator keeps a seed's low 32 bits only.
MAX_SEED = 2**31 - 1


class _Bounded(reprlib.Repr):
    """reprlib with small limits: at most 3 levels deep and 4 items a level, so writing a value out costs a few
    hundred steps whatever it holds. A value from an upload can share one list at every level ([a, a] nested 60
    deep is a few hundred bytes of pickle and 2**60 items written out in full); this never walks more of it."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxtuple, self.maxlist, self.maxarray, self.maxdict = 3, 4, 4, 4, 4
        self.maxset = self.maxfrozenset = self.maxdeque = 4
        self.maxstring = self.maxlong = self.maxother = SHOWN_CHARS

    def repr_dict(self, x, level):  # reprlib sorts every key first: a big dict is quoted in its own order
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(x[k], level - 1)}"
                 for k in _first(x, self.maxdict)]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"

    def repr_set(self, x, level):
        return self._unsorted(x, level, "{", "}")

    def repr_frozenset(self, x, level):
        return self._unsorted(x, level, "frozenset({", "})")

    def _unsorted(self, x, level, left, right):
        if level <= 0:
            return left + "..." + right
        items = [self.repr1(item, level - 1) for item in _first(x, self.maxset)]
        return left + ", ".join(items) + (", ..." if len(x) > self.maxset else "") + right

    def repr_instance(self, x, level):  # anything else (a tensor, an exception): its type, never its repr
        if x is None or isinstance(x, (bool, float, complex)):
            return repr(x)
        if isinstance(x, (bytes, bytearray)):
            return repr(x[:self.maxstring]) + ("..." if len(x) > self.maxstring else "")
        shape = getattr(x, "shape", None)
        return f"<{type(x).__name__}{f' of shape {tuple(shape)}' if isinstance(shape, tuple) else ''}>"

    def repr_int(self, x, level):  # repr of an int over 4,300 digits raises; its size says enough
        if x.bit_length() > 128:
            return f"<int of {x.bit_length():,} bits>"
        return repr(x)


def _first(items, count):
    return [item for _, item in zip(range(count), items)]


_BOUNDED = _Bounded()


def shown(value: Any, *, quote: bool = True) -> str:
    """A value from outside as a message may quote it, built bounded, never written out in full and then cut.

    ``quote`` (the default): a short repr, at most 3 levels and 4 items deep and about SHOWN_CHARS characters,
    with the length of what was left out: ``shown("x" * 3000)`` -> ``'xxx...'... (3,000 characters)``;
    ``shown(nested)`` -> ``[[[...], [...]], [[...], [...]]] (list of 2 items)``. ``quote=False`` gives text (an
    exception's message, a name) as it is, its first line cut to SHOWN_CHARS characters. Works for any value:
    one whose repr would fail is named by its type.
    """
    if isinstance(value, str) and not quote:
        first = value.strip().split("\n", 1)[0][:SHOWN_CHARS + 1]
        return first if len(first) <= SHOWN_CHARS else f"{first[:SHOWN_CHARS]}... ({len(value):,} characters)"
    try:
        quoted = _BOUNDED.repr(value)
    except Exception:  # a hostile __repr__, a recursion: the type alone
        quoted = f"<{type(value).__name__}>"
    if len(quoted) > SHOWN_CHARS:
        quoted = quoted[:SHOWN_CHARS] + "..."
    size = len(value) if type(value) in (str, bytes, list, tuple, dict, set, frozenset) else None
    if size is not None and (len(quoted) > SHOWN_CHARS or "..." in quoted):
        quoted += f" ({size:,} characters)" if isinstance(value, str) else f" ({size:,} bytes)" \
            if isinstance(value, bytes) else f" ({type(value).__name__} of {count(size, 'item')})"
    return quoted


def count(number: int, word: str) -> str:
    """A count and its noun, plural unless one: count(1, "token") -> "1 token", count(4, "head") -> "4 heads"."""
    return f"{number:,} {word}{'' if number == 1 else 's'}"


def number_text(number: float) -> str:
    """A number for a message: as it is up to 15 digits, else in scientific notation."""
    return str(number) if abs(number) < 1e15 else f"{number:.3g}"


def _in_range(number, name, minimum, maximum, error):
    if minimum is not None and number < minimum:
        if minimum == 1 and isinstance(number, int):
            raise error(f"{name} must be positive, got {number_text(number)}")
        raise error(f"{name} must be at least {minimum}, got {number_text(number)}")
    if maximum is not None and number > maximum:
        raise error(f"{name} must be at most {maximum}, got {number_text(number)}")
    return number


def real_number(value: Any, name: str, minimum: float | None = None, maximum: float | None = None, *,
                error: type[ValueError] = ValueError) -> float:
    """A finite number from an int, a float or numeric text; booleans, NaN and infinities are refused."""
    if value is None or value == "":
        raise error(f"{name} is empty")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise error(f"{name} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise error(f"{name} must be a number, got {shown(value)}") from None
    if not math.isfinite(number):
        raise error(f"{name} must be a finite number, got {shown(value)}")
    return _in_range(number, name, minimum, maximum, error)


def whole_number(value: Any, name: str, minimum: int | None = None, maximum: int | None = None, *,
                 error: type[ValueError] = ValueError) -> int:
    """An int from an int, a whole float (number boxes send 2.0) or numeric text; anything else is refused."""
    if value is None or value == "":
        raise error(f"{name} is empty")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise error(f"{name} must be a whole number, got {shown(value)}")
    if isinstance(value, int):
        return _in_range(value, name, minimum, maximum, error)
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise error(f"{name} must be a whole number, got {shown(value)}") from None
    if not math.isfinite(number) or not number.is_integer():
        raise error(f"{name} must be a whole number, got {shown(value)}")
    return _in_range(int(number), name, minimum, maximum, error)


def seed(value: Any, name: str = "seed") -> int:
    """A seed: a whole number from 0 to MAX_SEED."""
    return whole_number(value, name, 0, MAX_SEED)


def index(value: Any, name: str, count: int, what: str) -> int:
    """A whole number in 0..count-1, one of a model's ``count`` layers or heads:
    ``index(9, "layer", 4, "layers")`` -> ValueError("layer 9 is out of range: this model has 4 layers (0-3)")."""
    number = whole_number(value, name)
    if not 0 <= number < count:
        raise ValueError(f"{name} {number_text(number)} is out of range: this model has {count} {what} "
                         f"(0-{count - 1})")
    return number


def optional_whole_number(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
    """``whole_number``, with None or an empty field meaning "off"."""
    if value is None or value == "":
        return None
    return whole_number(value, name, minimum, maximum)


def text(value: Any, name: str, limit: int, *, limit_bytes: int | None = None) -> str:
    """Text of at most ``limit`` characters (and ``limit_bytes`` UTF-8 bytes when given); None is ""."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text, got {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{name} is {len(value):,} characters long; this server's limit is {limit:,}")
    if limit_bytes is not None:
        size = len(value.encode("utf-8", errors="surrogatepass"))
        if size > limit_bytes:
            raise ValueError(f"{name} is {size:,} bytes of UTF-8; this server's limit is {limit_bytes:,} bytes")
    return value


def flag(value: Any, name: str) -> bool:
    """A checkbox's state: True or False only. An API caller's "false" or 0 is refused, not read as its truth."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {shown(value)}")
    return value


def choice(value: Any, name: str, choices) -> Any:
    """One of ``choices``; a refusal lists them and quotes the value cut short."""
    options = list(choices)
    if value not in options:
        listed = ", ".join(str(option) for option in options[:12]) + (", ..." if len(options) > 12 else "")
        raise ValueError(f"{name}: {shown(value)} is not one of the choices ({listed})")
    return value
