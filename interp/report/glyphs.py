"""Corpus tokens as text a figure can draw: the fonts tokens are drawn in, and a visible stand-in
for every character that none of them has.

Matplotlib draws a character its font lacks as an empty box, which reads as a blank token (a
Devanagari vowel sign, a CJK word, an emoji), and draws control and format characters as nothing
at all. Token labels are therefore drawn in a chain of fonts, :func:`token_fonts`: DejaVu Sans
(matplotlib ships it: Latin, Greek, Cyrillic, arrows, box and block elements such as
SentencePiece's ``▁``), then whichever of :data:`WIDE_FONTS` this machine has (Noto, CJK,
emoji outlines), then STIX (shipped too: symbols); matplotlib takes each character from the first
font of the chain that has it. :func:`token_text` replaces what would still not show:

- newline and carriage return by ``↵``, tab by ``→``, any other control character by its byte,
  ``<0x1B>`` (the way byte-fallback vocabularies spell such tokens);
- a space other than ' ' (no-break, ideographic) by ``␣``;
- an invisible format character (zero-width space, joiner, byte-order mark), an unassigned or
  private code point, and any character no font of the chain draws by its code point, ``<U+200B>``;
- a combining mark that opens a token (it has no letter to sit on) after a dotted circle, ``◌ि``.
"""

from __future__ import annotations

import functools
import unicodedata

from matplotlib import font_manager
from matplotlib.ft2font import FT2Font

# Fonts with wide coverage, in the order they are consulted, where installed; colour-bitmap emoji
# fonts are left out (matplotlib cannot scale them).
WIDE_FONTS = (
    "DejaVu Sans",
    "Noto Sans",
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Noto Sans CJK KR",
    "Noto Sans Devanagari",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
    "Noto Sans Thai",
    "Noto Sans Symbols",
    "Noto Sans Symbols 2",
    "Noto Emoji",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Symbola",
    "Unifont",
    "STIXGeneral",
)
MARKS = {"\n": "↵", "\r": "↵", "\u2028": "↵", "\u2029": "↵", "\t": "→"}
HIDDEN = ("Cf", "Cs", "Co", "Cn")  # format, surrogate, private use, unassigned: nothing to see
COMBINING = ("Mn", "Me")


@functools.cache
def token_fonts() -> tuple[str, ...]:
    """The fonts token labels are drawn in: those of :data:`WIDE_FONTS` installed, in order."""
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return tuple(name for name in WIDE_FONTS if name in installed) or ("DejaVu Sans",)


@functools.cache
def _charmap(font: str) -> frozenset[int]:
    """The code points a font draws (empty when its file cannot be read)."""
    try:
        path = font_manager.findfont(font_manager.FontProperties(font), fallback_to_default=False)
        return frozenset(FT2Font(path).get_charmap())
    except (ValueError, RuntimeError, OSError):
        return frozenset()


def drawable(ch: str, fonts: tuple[str, ...] | None = None) -> bool:
    """Whether a font of the chain (default :func:`token_fonts`) has a glyph for ``ch``."""
    return any(ord(ch) in _charmap(font) for font in (fonts or token_fonts()))


def _visible(ch: str, first: bool, fonts: tuple[str, ...]) -> str:
    if ch in MARKS:
        return MARKS[ch]
    category = unicodedata.category(ch)
    if category == "Cc":
        return f"<0x{ord(ch):02X}>"
    if ch != " " and ch.isspace():
        return "␣"
    if category in HIDDEN or not drawable(ch, fonts):
        return f"<U+{ord(ch):04X}>"
    return "◌" + ch if first and category in COMBINING else ch


def token_text(token: object, fonts: tuple[str, ...] | None = None) -> str:
    """``token`` with every character the fonts cannot show replaced by a visible stand-in (see above)."""
    chain = fonts or token_fonts()
    return "".join(_visible(ch, i == 0, chain) for i, ch in enumerate(str(token)))
