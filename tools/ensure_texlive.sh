#!/usr/bin/env bash
# `make pdf` goes through Jupyter Book's LaTeX builder with XeLaTeX; its test reads the PDF with
# poppler's tools. Installs Debian's TeX Live and poppler-utils with apt-get when something is
# missing and we are root; otherwise says what to install. Nothing comes from outside apt.
set -euo pipefail
packages=(texlive-xetex texlive-latex-extra texlive-fonts-recommended texlive-fonts-extra
  texlive-science latexmk fonts-freefont-otf poppler-utils)
# What each package gives us that we check for: a command, or a file kpsewhich finds (bbm.sty, from
# texlive-fonts-extra, is loaded by Jupyter Book's jupyterBook.cls; siunitx is texlive-science).
missing() {
  local cmd
  for cmd in xelatex latexmk kpsewhich pdfinfo pdftotext pdffonts pdfimages pdftoppm; do
    command -v "$cmd" >/dev/null || return 0
  done
  local sty
  for sty in bbm.sty fncychap.sty tgtermes.sty siunitx.sty; do
    [ -n "$(kpsewhich "$sty" 2>/dev/null)" ] || return 0
  done
  [ -e /usr/share/fonts/opentype/freefont/FreeSerif.otf ] || return 0
  return 1
}
if ! missing; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "Installing TeX Live and poppler-utils from Debian for the PDF (a few minutes, once)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${packages[@]}" >/dev/null
  if missing; then
    echo "TeX Live was installed but something the PDF needs is still missing." >&2
    exit 1
  fi
  exit 0
fi
echo "The PDF needs TeX Live (XeLaTeX, latexmk) and poppler-utils." >&2
echo "Install them (Debian/Ubuntu):" >&2
echo "  sudo apt-get install -y ${packages[*]}" >&2
exit 1
