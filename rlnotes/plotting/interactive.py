"""Figures with a knob: curves precomputed by rlnotes for a grid of a parameter's values, and a
slider that switches between them in the reader's browser.

A figure is a Vega-Lite specification (https://vega.github.io/vega-lite/) that embeds every
curve for every value on the grid; the slider is a Vega-Lite parameter that filters them. Nothing
is computed in JavaScript: the browser only shows the numbers the chapter computed with rlnotes.

Where it is shown:

- the HTML book (``make book``): ``text/html`` that draws the figure with the Vega JavaScript the
  book serves from its own ``_static`` folder (the local Sphinx extension ``_ext/vega_offline.py``
  copies it there and tells the kernels so through the environment variable below), and
  ``image/png`` of the default setting for the PDF and anything without JavaScript;
- a notebook (JupyterLab, Jupyter Notebook 7, VS Code): ``application/vnd.vegalite.v5+json``,
  which these front ends draw themselves, interactive, with no network, and the same PNG.

Defined in: Markov decision processes and dynamic programming, section The effect of gamma (the
first figure with a knob); every chapter has one.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["Panel", "KnobFigure", "knob_figure", "BOOK_ENV_VAR"]

# Set by _ext/vega_offline.py when the HTML book is built: the page then loads the Vega bundle.
BOOK_ENV_VAR = "RLNOTES_VEGA_JS"
VEGALITE_MIME = "application/vnd.vegalite.v5+json"
VEGALITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
# The book's bundle (Vega 6, Vega-Lite 6, vega-embed; _ext/vega_offline.py) and vl-convert's
# static image use this Vega-Lite version; a notebook front end draws the v5 mimetype with its own.
VL_VERSION = "6.4"
BOOK_SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
MARKS = ("line", "point", "bar")
_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f"]


def _number(v, name: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers, got {v!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must hold finite numbers, got {v!r}")
    return x


class Panel:
    """One plot of a :class:`KnobFigure`: ``curves`` maps each point of the knob grid (a number,
    or a tuple of numbers for two knobs) to ``{series name: (x, y)}``, with ``x`` and ``y``
    1-D sequences of equal length (numbers; ``x`` may hold strings when ``x_type`` is
    ``"nominal"``). ``mark`` is ``"line"`` (with points), ``"point"`` or ``"bar"``;
    ``y_domain`` fixes the y axis (default: the range of every curve, so that moving the knob
    does not rescale the axis); ``log_x``/``log_y`` use a log scale.

    Defined in: Markov decision processes and dynamic programming, section The effect of gamma.
    """

    def __init__(self, curves: Mapping, *, x_label: str, y_label: str, title: str = "",
                 mark: str = "line", x_type: str = "quantitative", y_domain=None,
                 log_x: bool = False, log_y: bool = False, rule_y: float | None = None):
        if not isinstance(curves, Mapping) or not curves:
            raise ValueError(f"curves must be a non-empty mapping knob value -> {{series: (x, y)}},"
                             f" got {type(curves).__name__}")
        if mark not in MARKS:
            raise ValueError(f"mark must be one of {MARKS}, got {mark!r}")
        if x_type not in ("quantitative", "nominal", "ordinal"):
            raise ValueError(f"x_type must be 'quantitative', 'nominal' or 'ordinal', got {x_type!r}")
        if not isinstance(x_label, str) or not isinstance(y_label, str) or not x_label or not y_label:
            raise ValueError("x_label and y_label must be non-empty strings (axes are labelled)")
        self.curves = {}
        for key, series in curves.items():
            if not isinstance(series, Mapping) or not series:
                raise ValueError(f"curves[{key!r}] must be a non-empty mapping series -> (x, y)")
            out = {}
            for name, xy in series.items():
                if not isinstance(xy, (tuple, list)) or len(xy) != 2:
                    raise ValueError(f"curves[{key!r}][{name!r}] must be a pair (x, y)")
                x, y = list(np.asarray(xy[0]).tolist()), np.asarray(xy[1], dtype=np.float64)
                if y.ndim != 1 or len(x) != len(y) or len(y) == 0:
                    raise ValueError(f"curves[{key!r}][{name!r}]: x and y must be 1-D of equal "
                                     f"non-zero length, got {len(x)} and {y.shape}")
                if not np.isfinite(y).all():
                    raise ValueError(f"curves[{key!r}][{name!r}]: y must be finite")
                if x_type == "quantitative":
                    x = [_number(v, "x") for v in x]
                out[str(name)] = (x, y.tolist())
            self.curves[key] = out
        self.x_label, self.y_label, self.title = x_label, y_label, title
        self.mark, self.x_type = mark, x_type
        self.log_x, self.log_y, self.rule_y = bool(log_x), bool(log_y), rule_y
        ys = [v for s in self.curves.values() for _, y in s.values() for v in y]
        if y_domain is None:
            lo, hi = min(ys), max(ys)
            if mark == "bar":
                lo, hi = min(lo, 0.0), max(hi, 0.0)
            pad = 0.04 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.1
            y_domain = [lo - pad if not (mark == "bar" and lo == 0) else 0.0, hi + pad]
            if self.log_y:
                pos = [v for v in ys if v > 0]
                y_domain = [min(pos) / 1.3, max(pos) * 1.3]
        if len(y_domain) != 2 or not y_domain[0] < y_domain[1]:
            raise ValueError(f"y_domain must be [low, high] with low < high, got {y_domain!r}")
        self.y_domain = [float(y_domain[0]), float(y_domain[1])]


def _uniform(values: np.ndarray) -> float | None:
    """The step of an evenly spaced grid, or None."""
    if len(values) < 2:
        return 1.0
    d = np.diff(values)
    return float(d[0]) if np.allclose(d, d[0], rtol=1e-9, atol=1e-12) and d[0] > 0 else None


class KnobFigure:
    """A figure with one or two sliders (see :func:`knob_figure`). ``data(i)`` gives the records
    of panel i, ``curve(panel, key, series)`` one embedded curve; ``spec`` is the Vega-Lite
    specification; in a notebook or the book the object displays itself.

    Defined in: Markov decision processes and dynamic programming, section The effect of gamma.
    """

    def __init__(self, panels, knobs, default, title, fig_id, notes, width, height):
        self.panels, self.knobs, self.default, self.title = panels, knobs, default, title
        self.fig_id, self.notes, self.width, self.height = fig_id, notes, width, height
        self.spec = self._build_spec()
        self._png = None

    # --- the numbers -----------------------------------------------------------------------
    def keys(self):
        """Every point of the knob grid, as tuples."""
        return list(itertools.product(*(v for _, v in self.knobs)))

    def curve(self, panel: int, key, series: str):
        """The embedded (x, y) of one series at one point of the knob grid."""
        key = key if isinstance(key, tuple) else (key,)
        x, y = self.panels[panel].curves[key][series]
        return x, y

    def data(self, panel: int) -> list[dict]:
        p = self.panels[panel]
        rows = []
        for key, series in p.curves.items():
            idx = {f"k{j}": self.knobs[j][1].index(v) for j, v in enumerate(key)}
            for name, (x, y) in series.items():
                for xi, yi in zip(x, y):
                    rows.append({"p": panel, **idx, "series": name, "x": xi, "y": yi})
        return rows

    # --- the specification -----------------------------------------------------------------
    def _params(self):
        params = []
        for j, (label, values) in enumerate(self.knobs):
            n = len(values)
            params.append({"name": f"k{j}", "value": values.index(self.default[j]),
                           "bind": {"input": "range", "min": 0, "max": n - 1, "step": 1,
                                    "name": f"{label} "}})
        return params

    def _knob_text(self):
        """Per-grid-point caption: 'label = value' for each knob, and the note if any."""
        rows = []
        for key in self.keys():
            parts = [f"{label} = {_fmt(v)}" for (label, _), v in zip(self.knobs, key)]
            note = self.notes.get(key if len(key) > 1 else key[0], "") if self.notes else ""
            rows.append({**{f"k{j}": self.knobs[j][1].index(v) for j, v in enumerate(key)},
                         "caption": ",  ".join(parts) + (f"   ({note})" if note else "")})
        return rows

    def _filter(self):
        return " && ".join(f"datum.k{j} == k{j}" for j in range(len(self.knobs)))

    def _panel_spec(self, i: int, p: Panel):
        names = list(dict.fromkeys(n for s in p.curves.values() for n in s))
        color = {"field": "series", "type": "nominal", "title": None,
                 "scale": {"domain": names, "range": _PALETTE[:len(names)] if len(names) <= 8
                           else {"scheme": "category20"}},
                 "legend": {"orient": "bottom", "columns": min(len(names), 3),
                            "labelLimit": 260}}
        x_scale = {"type": "log"} if p.log_x else {"zero": False}
        if p.x_type != "quantitative":
            x_scale = {}
        y_scale = {"domain": p.y_domain, "type": "log" if p.log_y else "linear", "nice": False}
        if not p.log_y:
            y_scale["zero"] = False
        x = {"field": "x", "type": p.x_type, "title": p.x_label, "scale": x_scale}
        if p.x_type != "quantitative":
            x["axis"] = {"labelAngle": 0}
            x["sort"] = None
        y = {"field": "y", "type": "quantitative", "title": p.y_label, "scale": y_scale}
        if p.log_y:
            y["axis"] = {"format": "~g"}
        tooltip = [{"field": "series", "type": "nominal"},
                   {"field": "x", "type": p.x_type, "title": p.x_label},
                   {"field": "y", "type": "quantitative", "title": p.y_label, "format": ".4g"}]
        if p.mark == "bar":
            mark = {"type": "bar"}
            enc = {"x": x, "y": y, "color": color, "tooltip": tooltip}
            if len(names) > 1:
                enc["xOffset"] = {"field": "series", "type": "nominal", "sort": names}
        elif p.mark == "point":
            mark = {"type": "point", "filled": True, "size": 50}
            enc = {"x": x, "y": y, "color": color, "tooltip": tooltip,
                   "shape": {"field": "series", "type": "nominal", "title": None,
                             "scale": {"domain": names}, "legend": color["legend"]}}
        else:
            mark = {"type": "line", "point": {"size": 18}, "strokeWidth": 2, "clip": True}
            enc = {"x": x, "y": y, "color": color, "tooltip": tooltip}
        layers = [{"data": {"name": f"panel{i}"}, "transform": [{"filter": self._filter()}],
                   "mark": mark, "encoding": enc, "name": f"{self.fig_id}_panel{i}"}]
        if p.rule_y is not None:
            layers.append({"data": {"values": [{"y": float(p.rule_y)}]},
                           "mark": {"type": "rule", "color": "#888", "strokeDash": [4, 3]},
                           "encoding": {"y": {"field": "y", "type": "quantitative"}}})
        spec = {"layer": layers, "width": self.width, "height": self.height}
        if p.title:
            spec["title"] = {"text": p.title, "fontSize": 13}
        return spec

    def _build_spec(self):
        panels = [self._panel_spec(i, p) for i, p in enumerate(self.panels)]
        caption = {"data": {"name": "captions"}, "transform": [{"filter": self._filter()}],
                   "mark": {"type": "text", "align": "left", "fontSize": 13, "fontWeight": "bold"},
                   "encoding": {"text": {"field": "caption", "type": "nominal"},
                                "x": {"value": 0}, "y": {"value": 8}},
                   "width": self.width * len(panels) + 40 * (len(panels) - 1), "height": 16,
                   "view": {"stroke": None}}
        body = panels[0] if len(panels) == 1 else {"hconcat": panels,
                                                   "resolve": {"scale": {"color": "independent"}}}
        spec = {
            "$schema": VEGALITE_SCHEMA,
            "description": self.title,
            "params": self._params(),
            "datasets": {**{f"panel{i}": self.data(i) for i in range(len(self.panels))},
                         "captions": self._knob_text()},
            "vconcat": [caption, body],
            "config": {"view": {"stroke": "#ccc"}, "axis": {"labelFontSize": 11,
                                                            "titleFontSize": 12},
                       "legend": {"labelFontSize": 11}},
            "usermeta": {"rlnotes": {"id": self.fig_id,
                                     "knobs": [{"label": l, "values": list(v)}
                                               for l, v in self.knobs]}},
        }
        if self.title:
            spec["title"] = {"text": self.title, "fontSize": 14, "anchor": "start"}
        return spec

    # --- display ---------------------------------------------------------------------------
    def png(self, scale: float = 2.0) -> bytes:
        """The figure at its default setting as a PNG (for the PDF and readers without
        JavaScript), drawn by vl-convert from the same specification."""
        self._png = self._png or {}
        if scale not in self._png:
            import vl_convert as vlc

            self._png[scale] = vlc.vegalite_to_png({**self.spec, "$schema": BOOK_SCHEMA},
                                                   vl_version=VL_VERSION, scale=scale)
        return self._png[scale]

    def html(self) -> str:
        """A <div> and a script that draws the figure with the page's Vega (vegaEmbed)."""
        div_id = f"rlnotes-fig-{self.fig_id}"
        spec = json.dumps({**self.spec, "$schema": BOOK_SCHEMA},
                          separators=(",", ":")).replace("</", "<\\/")
        png = base64.b64encode(self.png(scale=1.0)).decode()  # until Vega draws
        alt = html.escape(self.title or self.fig_id, quote=True)
        return (
            # the slider's own number is the setting's index: the caption shows the value
            f'<style>#{div_id} .vega-bind label > span:last-child {{display: none}}\n'
            # wider than the text column (two panels): scaled down to fit, never under the sidebar
            f'#{div_id} {{overflow-x: auto; max-width: 100%}}\n'
            f'#{div_id} svg {{max-width: 100%; height: auto}}</style>\n'
            f'<div class="rlnotes-knob-figure" id="{div_id}" data-figure="{self.fig_id}">'
            f'<img class="rlnotes-knob-static" alt="{alt}" style="max-width:100%" '
            f'src="data:image/png;base64,{png}"/></div>\n'
            '<script type="text/javascript">(function () {\n'
            f'  var el = document.getElementById("{div_id}"), spec = {spec};\n'
            '  function draw() {\n'
            '    if (!window.vegaEmbed) return;  /* no Vega here: the static image stays */\n'
            '    vegaEmbed(el, spec, {actions: false, renderer: "svg"}).then(function (res) {\n'
            '      window.rlnotesFigures = window.rlnotesFigures || {};\n'
            f'      window.rlnotesFigures["{self.fig_id}"] = res.view;\n'
            '    }).catch(function (err) { console.error("rlnotes figure: " + err); });\n'
            '  }\n'
            '  if (window.vegaEmbed) draw(); else window.addEventListener("load", draw);\n'
            '})();</script>')

    def _repr_mimebundle_(self, include=None, exclude=None):
        text = f"<{self.title or self.fig_id}: interactive figure, knobs " \
               f"{', '.join(l for l, _ in self.knobs)}>"
        bundle = {"text/plain": text}
        if os.environ.get(BOOK_ENV_VAR):
            bundle["image/png"] = self.png()
            bundle["text/html"] = self.html()
        else:
            bundle[VEGALITE_MIME] = self.spec
            try:
                bundle["image/png"] = self.png()
            except ImportError:  # no vl-convert-python (e.g. a student's install): the front
                pass             # end still draws the interactive figure from the spec
        return bundle


def _fmt(v) -> str:
    if isinstance(v, (int, np.integer)) or float(v).is_integer() and abs(v) >= 1:
        return str(int(v))
    return f"{float(v):.3g}"


def knob_figure(panels, knobs, *, default=None, title: str = "", fig_id: str,
                notes: Mapping | None = None, width: int = 360, height: int = 240) -> KnobFigure:
    """A figure whose curves switch with one or two sliders.

    ``panels``: a :class:`Panel` or a list of up to three, side by side, sharing the sliders.
    ``knobs``: ``{label: values}`` with one or two entries, in order: the grid of each knob
    (numbers); every panel's ``curves`` has a key for every point of the grid (the value, or a
    tuple of values for two knobs). ``default``: the setting shown first and in the static
    image (default: the first value of each knob). ``fig_id``: a short unique name (letters,
    digits, ``-`` and ``_``) by which tests find the figure in the page. ``notes``: an optional
    caption per grid point, shown beside the knob's value.

    The figure shows what rlnotes computed: the slider only selects among the embedded curves.

    Defined in: Markov decision processes and dynamic programming, section The effect of gamma.
    """
    if isinstance(panels, Panel):
        panels = [panels]
    if not isinstance(panels, Sequence) or not 1 <= len(panels) <= 3 or \
            not all(isinstance(p, Panel) for p in panels):
        raise ValueError(f"panels must be a Panel or a list of 1 to 3 Panels, got {panels!r}")
    if not isinstance(knobs, Mapping) or not 1 <= len(knobs) <= 2:
        raise ValueError(f"knobs must be a mapping {{label: values}} with 1 or 2 entries, got {knobs!r}")
    knob_list = []
    for label, values in knobs.items():
        if not isinstance(label, str) or not label:
            raise ValueError(f"knobs: each label must be a non-empty string, got {label!r}")
        vals = [_number(v, f"knobs[{label!r}]") for v in values]
        vals = [int(v) if float(v).is_integer() and isinstance(o, (int, np.integer)) else v
                for v, o in zip(vals, values)]
        if len(vals) < 2 or len(set(vals)) != len(vals):
            raise ValueError(f"knobs[{label!r}] must hold at least 2 distinct values, got {values!r}")
        knob_list.append((label, vals))
    if not isinstance(fig_id, str) or not fig_id or \
            not all(c.isalnum() or c in "-_" for c in fig_id):
        raise ValueError(f"fig_id must be a non-empty name of letters, digits, '-' and '_', "
                         f"got {fig_id!r}")
    grid = list(itertools.product(*(v for _, v in knob_list)))
    if default is None:
        default = grid[0]
    default = default if isinstance(default, tuple) else (default,)
    if tuple(default) not in set(grid):
        raise ValueError(f"default must be a point of the knob grid, got {default!r}")
    for i, p in enumerate(panels):
        fixed = {}
        for key, series in p.curves.items():
            k = key if isinstance(key, tuple) else (key,)
            fixed[tuple(_number(v, "curves key") for v in k)] = series
        missing = [g for g in grid if tuple(float(v) for v in g) not in fixed]
        extra = set(fixed) - {tuple(float(v) for v in g) for g in grid}
        if missing or extra:
            raise ValueError(f"panels[{i}].curves must have exactly one key per point of the knob "
                             f"grid; missing {missing[:3]}, unexpected {sorted(extra)[:3]}")
        p.curves = {g: fixed[tuple(float(v) for v in g)] for g in grid}
    if notes is not None and not isinstance(notes, Mapping):
        raise ValueError(f"notes must be a mapping grid point -> text, got {type(notes).__name__}")
    return KnobFigure(list(panels), knob_list, tuple(default), title, fig_id, dict(notes or {}),
                      int(width), int(height))
