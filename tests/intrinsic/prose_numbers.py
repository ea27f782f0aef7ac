"""Every number the intrinsic section's headline and summary state, traced to the metrics (or the settings that
ran): the prose's number-like tokens against every metric and setting value in the formats the report uses.

Caveats first: citations of the paper (sections, tables, equations, figures, years, seeds/002) and Eq. 5's fixed
range "(0, 2)" are taken out before the check; a sign (+27.0%) is dropped, so the magnitude is what is matched.
"""

import re

#: The paper's references and constants of its definitions, which are not measurements.
CITATIONS = [
    r"seeds/\d+",
    r"\b(?:Tables?|Secs?\.|Eq\.|Figs?\.)\s*\d+(?:\.\d+)?(?:\s*-\s*\d+)?",
    r"et al\.,? \d{4}",
    r"\(0, 2\)",
    r"CIFAR-10",
]
TOKEN = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?%?")
FORMATS = ("{:.0f}", "{:.1f}", "{:.2f}", "{:.2g}", "{:.3g}", "{:.4g}", "{:g}", "{:.0%}", "{:.1%}", "{:.1e}")


def values(obj):
    """Every number in a nested dict/list (booleans left out)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from values(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from values(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def formatted(*sources):
    """Each value of the sources written in each of :data:`FORMATS` (magnitudes)."""
    out = set()
    for v in (abs(x) for s in sources for x in values(s)):
        if v != v or v in (float("inf"),):
            continue
        out |= {f.format(v) for f in FORMATS}
        if float(v).is_integer():
            out.add(str(int(v)))
    return out


def unexplained(texts, *sources):
    """The number-like tokens of ``texts`` that no value of ``sources`` formats to."""
    allowed = formatted(*sources)
    left = []
    for text in texts:
        for pattern in CITATIONS:
            text = re.sub(pattern, " ", text)
        left += [t for t in TOKEN.findall(text) if t not in allowed]
    return left
