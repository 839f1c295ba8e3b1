#!/bin/sh
# Fills docs/ with the PDFs this known-item set asks about (questions answered by one page, in
# queries.tsv and qrels.tsv; doc ids name pages) and two more as distractors. They are not in the
# repository: Debian's packages ship them (bzip2-doc, zlib1g-dev,
# shared-mime-info, fontconfig, nettle-dev, libtasn1-doc), the DPR paper (Karpukhin et al., 2020,
# EMNLP, two columns) is example-docs/pdf/multi-column.pdf of github.com/Unstructured-IO/unstructured.
set -eu
cd "$(dirname "$0")"
mkdir -p docs
doc=/usr/share/doc
zcat "$doc/bzip2/manual.pdf.gz" > docs/bzip2-manual.pdf
zcat "$doc/zlib1g-dev/crc-doc.1.0.pdf.gz" > docs/zlib-crc-doc.pdf
cp "$doc/shared-mime-info/shared-mime-info-spec.pdf" docs/
zcat "$doc/fontconfig/fontconfig-user.pdf.gz" > docs/fontconfig-user.pdf
zcat "$doc/nettle-dev/nettle.pdf.gz" > docs/nettle.pdf
cp "$doc/libtasn1-doc/libtasn1.pdf" docs/
curl -fsSL -o docs/dpr-paper.pdf \
  https://raw.githubusercontent.com/Unstructured-IO/unstructured/3e5482bfcdc843b5218ad98d2845b4b71ab013b7/example-docs/pdf/multi-column.pdf
