"""Are the course's colours readable by everyone? Measures each colour map and colour set in seqlab.colours.

    python scripts/colour_check.py                 # the table
    python scripts/colour_check.py --swatches DIR  # and a PNG per map: as seen, and under each simulation
    python scripts/colour_check.py --map Greys     # also measure a map a notebook uses (NAME:diverging if it is)
    python scripts/colour_check.py --figure fig.png out.png   # a figure as each vision sees it, 2 x 2

Colour differences are Euclidean distances in CAM02-UCS (J', a', b'; Luo et al. 2006), the space colorspacious
and viscm judge maps in; about 1 is a just-noticeable difference, and any two of matplotlib's tab10 colours lie
20 or more apart.
Colour vision deficiency is simulated with Machado et al. (2009) at full severity (protanopia, deuteranopia,
tritanopia), as colorspacious's ``cvd_space`` does, then clipped to the display's gamut. Both transforms are
written out here in numpy so the check needs no package beyond the course's; tests/test_colours.py compares them
with colorspacious where that is installed.

For each colour map:
- lightness: J' along the map; a sequential map must be monotonic, a diverging one monotonic on each side of
  its light midpoint (so the order of values survives greyscale printing and every simulation);
- uniformity: the largest over the smallest of the 32 equal steps' colour differences (1 would be perfect);
- for normal vision and each simulation: the difference between the map's two ends (a diverging map: between
  +v and -v, |v| >= 0.25: can the sign be told?), and the smallest difference between neighbouring colours of a
  16-step version of the map (can a reader still tell 0.3 from 0.37?).
For a mark drawn on maps (a highlight outline and its halo, a masked cell): its least difference from any colour
of those maps. For series drawn together: the least difference between two drawn alike (same marker or line
style; series that differ in shape need no colour difference). Each under every vision.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgb

VISIONS = ("normal", "protanopia", "deuteranopia", "tritanopia")

# Machado, Oliveira & Fernandes (2009), severity 1.0 ("-opia"), applied to linear sRGB (colorspacious's table).
MACHADO_2009 = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}

# The thresholds tests/test_colours.py holds the course to (CAM02-UCS units; the measured values are in the table).
MAX_LIGHTNESS_REVERSAL = 0.5   # J' may run against the map's direction by this much (interpolation noise)
MAX_UNEVENNESS = 3.0           # largest / smallest of 32 equal steps' differences (viridis 1.1, Blues 2.1)
MIN_END_DIFFERENCE = 40.0      # a sequential map's two ends, under every vision
MIN_SIDE_DIFFERENCE = 12.0     # a diverging map's +v and -v for |v| >= 0.25, under every vision
MIN_STEP_DIFFERENCE = 2.5      # neighbours in a 16-step map, under every vision (a just-noticeable step is ~1)
MIN_MARK_DIFFERENCE = 10.0     # a mark (outline, masked cell) against every colour of the map it is drawn on
MIN_SERIES_DIFFERENCE = 10.0   # two series drawn alike (same marker and line style) need colours this far apart


def _linear(srgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] -> linear light (IEC 61966-2-1)."""
    return np.where(srgb < 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _encode(linear: np.ndarray) -> np.ndarray:
    return np.where(linear <= 0.0031308, linear * 12.92, 1.055 * np.abs(linear) ** (1 / 2.4) - 0.055)


_XYZ_TO_SRGB = np.array([[3.2406, -1.5372, -0.4986], [-0.9689, 1.8758, 0.0415], [0.0557, -0.2040, 1.0570]])
_SRGB_TO_XYZ = np.linalg.inv(_XYZ_TO_SRGB)
_M_CAT02 = np.array([[0.7328, 0.4296, -0.1624], [-0.7036, 1.6975, 0.0061], [0.0030, 0.0136, 0.9834]])
_M_HPE = np.array([[0.38971, 0.68898, -0.07868], [-0.22981, 1.18340, 0.04641], [0.0, 0.0, 1.0]])
_D65 = np.array([95.047, 100.0, 108.883])       # the display's white, XYZ on the 0-100 scale


def _viewing_conditions():
    """CIECAM02 for an sRGB display: D65 white, L_A = 64/pi/5 cd/m^2, Y_b = 20, average surround."""
    white, L_A, Y_b, F, c, N_c = _D65, 64 / np.pi / 5, 20.0, 1.0, 0.69, 1.0
    D = np.clip(F * (1 - (1 / 3.6) * np.exp((-L_A - 42) / 92)), 0, 1)
    D_RGB = D * white[1] / (_M_CAT02 @ white) + 1 - D
    k = 1 / (5 * L_A + 1)
    F_L = 0.2 * k ** 4 * (5 * L_A) + 0.1 * (1 - k ** 4) ** 2 * (5 * L_A) ** (1 / 3)
    n = Y_b / white[1]
    N_bb = 0.725 * (1 / n) ** 0.2
    to_cone = _M_HPE @ np.linalg.inv(_M_CAT02) @ np.diag(D_RGB) @ _M_CAT02     # XYZ -> adapted HPE cone space
    return {"to_cone": to_cone, "F_L": F_L, "n": n, "z": 1.48 + np.sqrt(n), "N_bb": N_bb, "c": c, "N_c": N_c}


_VC = _viewing_conditions()


def _compress(cone: np.ndarray) -> np.ndarray:
    tmp = (_VC["F_L"] * np.abs(cone) / 100) ** 0.42
    return np.sign(cone) * 400 * tmp / (tmp + 27.13) + 0.1


_A_WHITE = (np.array([2, 1, 1 / 20]) @ _compress(_VC["to_cone"] @ _D65) - 0.305) * _VC["N_bb"]   # white's achromatic signal


def cam02ucs(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) sRGB in [0, 1] -> (..., 3) CAM02-UCS J', a', b'."""
    xyz = 100 * _linear(np.asarray(rgb, dtype=float)) @ _SRGB_TO_XYZ.T
    cone = _compress(xyz @ _VC["to_cone"].T)                                       # (..., 3) R'a, G'a, B'a
    a = cone @ np.array([1, -12 / 11, 1 / 11])
    b = cone @ np.array([1 / 9, 1 / 9, -2 / 9])
    h = np.arctan2(b, a)
    A = (cone @ np.array([2, 1, 1 / 20]) - 0.305) * _VC["N_bb"]
    J = 100 * np.maximum(A / _A_WHITE, 0) ** (_VC["c"] * _VC["z"])
    e = (12500 / 13) * _VC["N_c"] * _VC["N_bb"] * (np.cos(h + 2) + 3.8)
    t = e * np.hypot(a, b) / (cone @ np.array([1, 1, 21 / 20]))
    M = t ** 0.9 * (J / 100) ** 0.5 * (1.64 - 0.29 ** _VC["n"]) ** 0.73 * _VC["F_L"] ** 0.25
    J_p, M_p = 1.7 * J / (1 + 0.007 * J), np.log1p(0.0228 * M) / 0.0228
    return np.stack([J_p, M_p * np.cos(h), M_p * np.sin(h)], axis=-1)


def simulate(rgb: np.ndarray, vision: str) -> np.ndarray:
    """(..., 3) sRGB as a reader with ``vision`` (one of VISIONS) sees it, clipped to the display's gamut."""
    rgb = np.asarray(rgb, dtype=float)
    if vision == "normal":
        return rgb
    if vision not in MACHADO_2009:
        raise ValueError(f"vision must be one of {VISIONS}, got {vision!r}")
    return np.clip(_encode(np.clip(_linear(rgb) @ MACHADO_2009[vision].T, 0, 1)), 0, 1)


def difference(rgb1: np.ndarray, rgb2: np.ndarray) -> np.ndarray:
    """CAM02-UCS colour difference between sRGB colours (broadcasting over leading axes)."""
    return np.linalg.norm(cam02ucs(rgb1) - cam02ucs(rgb2), axis=-1)


def samples(cmap: str, n: int) -> np.ndarray:
    """(n, 3) sRGB colours evenly spaced along matplotlib colour map ``cmap``."""
    return colormaps[cmap](np.linspace(0, 1, n))[:, :3]


def lightness_reversal(cmap: str, diverging: bool) -> float:
    """How far J' runs against the map's direction: 0 for a monotonic map (a diverging one: on each side)."""
    J = cam02ucs(samples(cmap, 256))[:, 0]
    # each run should rise: a sequential map from its dark end, a diverging one from both ends to its light middle
    runs = (J[:128], J[128:][::-1]) if diverging else (J if J[-1] > J[0] else J[::-1],)
    return float(max(np.max(np.maximum.accumulate(run) - run) for run in runs))


def map_report(cmap: str, diverging: bool = False) -> dict:
    """The numbers the table prints for one colour map (see the module docstring); "ends" is, for a diverging
    map, the smallest difference between +v and -v for |v| >= 0.25 (can a reader tell the sign?)."""
    J = cam02ucs(samples(cmap, 256))[:, 0]
    step_sizes = np.linalg.norm(np.diff(cam02ucs(samples(cmap, 33)), axis=0), axis=-1)
    report = {"map": cmap, "diverging": diverging, "lightness": (float(J[0]), float(J.max()), float(J[-1])),
              "reversal": lightness_reversal(cmap, diverging), "unevenness": float(step_sizes.max() / step_sizes.min())}
    t = np.linspace(0, 0.375, 13)
    for vision in VISIONS:
        seen = simulate(samples(cmap, 17), vision)
        if diverging:
            ends = difference(simulate(colormaps[cmap](t)[:, :3], vision),
                              simulate(colormaps[cmap](1 - t)[:, :3], vision)).min()
        else:
            ends = difference(seen[0], seen[-1])
        report[vision] = (float(ends), float(difference(seen[:-1], seen[1:]).min()))
    return report


def mark_report(name: str, mark: tuple[str, ...], cmaps: tuple[str, ...]) -> dict:
    """How well a mark drawn in the colours ``mark`` (a line and its halo: the one that stands out counts)
    shows on every colour of each map in ``cmaps``: the smallest such difference, under each vision."""
    report = {"name": name, "least": MIN_MARK_DIFFERENCE}
    for vision in VISIONS:
        mark_seen = simulate(np.array([to_rgb(c) for c in mark]), vision)                  # (k, 3)
        cells = simulate(np.concatenate([samples(cmap, 256) for cmap in cmaps]), vision)   # (n, 3)
        d = difference(mark_seen[:, None], cells[None]).max(axis=0)
        report[vision] = float(d.min())
    return report


def series_report(name: str, styles: list[tuple[str, str]]) -> dict:
    """For series drawn together, each ``(colour, marker or line style)``: the smallest colour difference
    between two series drawn alike (same style), under each vision; inf when every series has its own style."""
    report = {"name": name, "least": MIN_SERIES_DIFFERENCE}
    pairs = [(a, b) for k, a in enumerate(styles) for b in styles[k + 1:] if a[1] == b[1]]
    for vision in VISIONS:
        d = [difference(simulate(np.array(to_rgb(a[0])), vision), simulate(np.array(to_rgb(b[0])), vision))
             for a, b in pairs]
        report[vision] = float(min(d, default=np.inf))
    return report


def failures(report: dict) -> list[str]:
    """The thresholds above that a report (map_report, mark_report or series_report) misses, in words."""
    out = []
    if "map" in report:
        if report["reversal"] > MAX_LIGHTNESS_REVERSAL:
            out.append(f"lightness reverses by {report['reversal']:.1f}")
        if report["unevenness"] > MAX_UNEVENNESS:
            out.append(f"steps uneven x{report['unevenness']:.1f}")
        least = MIN_SIDE_DIFFERENCE if report["diverging"] else MIN_END_DIFFERENCE
        for vision in VISIONS:
            ends, step = report[vision]
            if ends < least:
                out.append(f"{vision}: {'sides' if report['diverging'] else 'ends'} {ends:.0f} apart")
            if step < MIN_STEP_DIFFERENCE:
                out.append(f"{vision}: neighbours {step:.1f} apart")
        return out
    return [f"{v}: {report[v]:.1f} apart" for v in VISIONS if report[v] < report["least"]]


def swatch(cmap: str, path: Path) -> None:
    """Save a PNG of ``cmap`` as seen with each vision (one labelled band each)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 1.9), dpi=80, facecolor="white")
    for ax, vision in zip(fig.subplots(len(VISIONS), 1), VISIONS):
        ax.imshow(simulate(samples(cmap, 256), vision)[None], aspect="auto", extent=(0, 1, 0, 1))
        ax.set_axis_off()
        ax.text(-0.01, 0.5, vision, ha="right", va="center", fontsize=8, transform=ax.transAxes)
    fig.suptitle(cmap, fontsize=9)
    fig.subplots_adjust(left=0.2, right=0.98, top=0.86, bottom=0.02, hspace=0.15)
    fig.savefig(path)


def simulate_png(source: Path, path: Path) -> None:
    """Save ``source`` (a figure's PNG) as seen with each vision, side by side in a 2 x 2 grid."""
    from matplotlib.figure import Figure
    from matplotlib.image import imread

    rgb = imread(source)[..., :3]
    h, w = rgb.shape[:2]
    fig = Figure(figsize=(2 * w / 80, 2 * h / 80 + 0.5), dpi=80, facecolor="white")
    for ax, vision in zip(fig.subplots(2, 2).flat, VISIONS):
        ax.imshow(simulate(rgb, vision))
        ax.set_axis_off()
        ax.set_title(vision, fontsize=10)
    fig.subplots_adjust(left=0, right=1, top=1 - 0.3 / fig.get_figheight(), bottom=0, wspace=0.02, hspace=0.06)
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    from seqlab import colours

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swatches", type=Path, help="folder for one PNG per colour map, as each vision sees it")
    parser.add_argument("--map", action="append", default=[], metavar="NAME[:diverging]",
                        help="also measure this matplotlib map (e.g. one a notebook uses, or a candidate)")
    parser.add_argument("--figure", nargs=2, type=Path, metavar=("PNG", "OUT"),
                        help="save the figure PNG as each vision sees it to OUT (nothing else is done)")
    args = parser.parse_args(argv)
    if args.figure:
        simulate_png(*args.figure)
        return 0
    maps = colours.MAPS | {m.split(":")[0]: m.endswith(":diverging") for m in args.map}
    failed = 0
    print(f"{'map':<10} {'J′ start/max/end':>16} {'rev':>4} {'uneven':>6}  "
          + "  ".join(f"{v[:4] + ' ends/step':>15}" for v in VISIONS) + "  fails")
    for cmap, diverging in maps.items():
        r = map_report(cmap, diverging)
        problems = failures(r)
        failed += bool(problems)
        print(f"{cmap:<10} {'/'.join(f'{x:.0f}' for x in r['lightness']):>16} {r['reversal']:>4.1f} "
              f"{r['unevenness']:>6.2f}  " + "  ".join(f"{r[v][0]:>9.1f}/{r[v][1]:<5.1f}" for v in VISIONS)
              + "  " + ("; ".join(problems) or "-"))
        if args.swatches:
            args.swatches.mkdir(parents=True, exist_ok=True)
            swatch(cmap, args.swatches / f"{cmap}.png")
    print(f"\n{'least difference':<28} " + "  ".join(f"{v:>12}" for v in VISIONS) + "  fails")
    reports = [mark_report(name, *mark) for name, mark in colours.MARKS.items()]
    reports += [series_report(name, styles) for name, styles in colours.SERIES.items()]
    for r in reports:
        problems = failures(r)
        failed += bool(problems)
        print(f"{r['name']:<28} " + "  ".join(f"{r[v]:>12.1f}" for v in VISIONS) + "  " + ("; ".join(problems) or "-"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
