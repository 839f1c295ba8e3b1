"""Reading order of two-column PDFs as pmd reads them (PDFium's text, indexing/convert/pdf.py):

    .venv/bin/python scripts/bench/reading_order.py PAPER.pdf [PAPER.pdf …]

The reference order reads each page's left half, then its right half (PDFium's text within each
half: the columns, whatever order the page's text objects come in). A sentence of the reference
(8 words or more) is intact when the page's text as pmd reads it holds it word for word (spaces
and line breaks aside). Text spanning both columns (titles, wide figures) is cut in the reference:
its sentences count as broken, so the fraction is a lower bound."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pypdfium2 as pdfium

from indexing.convert.pdf import Vocabulary, page_text

_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")


def _flat(text: str) -> str:
    return " ".join(text.replace("\x02", "").split())


def main() -> int:
    total_sentences = total_intact = 0
    for name in sys.argv[1:]:
        doc = pdfium.PdfDocument(name)
        raws, halves = [], []
        for page in doc:
            width, height = page.get_size()
            textpage = page.get_textpage()
            raws.append(textpage.get_text_bounded())
            halves.append(
                textpage.get_text_bounded(0, 0, width / 2, height)
                + "\n"
                + textpage.get_text_bounded(width / 2, 0, width, height)
            )
            textpage.close()
        vocabulary = Vocabulary(raws)
        sentences = intact = 0
        for raw, reference in zip(raws, halves):
            read = _flat(page_text(raw, vocabulary))
            for sentence in _SENTENCE_END.split(_flat(page_text(reference, vocabulary))):
                if len(sentence.split()) >= 8:
                    sentences += 1
                    intact += sentence in read
        print(
            f"{Path(name).name}: {len(raws)} pages, {intact} of {sentences} sentences intact "
            f"({100 * intact / max(sentences, 1):.1f}%)"
        )
        total_sentences += sentences
        total_intact += intact
    print(f"all: {total_intact} of {total_sentences} ({100 * total_intact / max(total_sentences, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
