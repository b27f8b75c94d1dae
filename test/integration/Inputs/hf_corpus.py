"""Mixed text for tokenizer tests, made deterministically from the bundled
corpus plus generated snippets: prose, code, non-Latin scripts (CJK, Cyrillic,
Arabic, Devanagari, Hangul, Greek), emoji (with ZWJ sequences, skin tones,
flags), whitespace runs of every kind, combining marks, control characters,
and special tokens inside the text. `documents` returns str documents;
`raw_documents` adds a few with invalid UTF-8 bytes (as bytes).
"""

import random

SENTENCES = [
    "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
    "你好，世界。今天天气很好，我们去公园散步吧。机器学习模型需要大量数据。",
    "こんにちは世界。カタカナとひらがなと漢字が混ざった文章です。",
    "안녕하세요 세계! 한국어 문장도 토큰화됩니다.",
    "مرحبا بالعالم. هذه جملة باللغة العربية مع أرقام ١٢٣ و 456.",
    "नमस्ते दुनिया। यह हिंदी में एक वाक्य है, संख्या १२३ के साथ।",
    "Γειά σου κόσμε! ΟΔΥΣΣΕΥΣ και ΣΟΦΟΣ, τελικό σίγμα ς.",
    "Héllo wörld, naïve café — it's they're we'll I'd Y'ALL DON'T",
    "İstanbul'da ŞEHİR; straße ß ǅ Ⅻ ﬁ ＡＢＣ１２３ ½ ²",
    "e\u0301 a\u0308 n\u0303 (combining) vs é ä ñ (precomposed)",
]
EMOJI = ["🚀", "🔥", "😀", "👍🏽", "👩\u200d💻", "🇺🇸", "🇯🇵", "❤️", "🙏", "🤖", "🧪", "✨", "🐍"]
SPACES = ["  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
          "\u2003", "\u0085", "\u000b", "\u000c", "\u200b", "        ", "\u2028"]
ODD = ["\u0001", "\u007f", "\ufffd", "\ue000", "\u0000", "\u00ad", "\u200d", "\ufeff",
       "\u0378", "x\U000db173y", "\U000f28c2",  # unassigned, unassigned, private use
       "<0x41>", "▁▁", "##ing", "'s'S'll", "1234567890", "3.14159", "1,000,000"]
SCRIPTS = [(0x4E00, 0x4FFF), (0x0410, 0x044F), (0x0621, 0x064A), (0x0905, 0x0939),
           (0xAC00, 0xAE00), (0x3041, 0x3096), (0x03B1, 0x03C9), (0x0E01, 0x0E2E)]
CODE = [
    "def f(x, y=2):\n    return {'a': [x ** y, x // y]}\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nstd::vector<int32_t> ids{1, 2, 3}; // ids\n",
    "SELECT name, COUNT(*) FROM t WHERE x >= 10 GROUP BY name;\n",
    "    if err != nil {\n        return fmt.Errorf(\"read %q: %w\", path, err)\n    }\n",
    "const re = /\\s+(?!\\S)/g; console.log(`${a}+${b}=${a + b}`);\n",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>\n",
]


def _word(rng):
    lo, hi = rng.choice(SCRIPTS)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))


def _snippet(rng, specials):
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice(SENTENCES)
    if kind == 1:
        return " ".join(_word(rng) for _ in range(rng.randint(3, 20)))
    if kind == 2:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 6)))
    if kind == 3:
        return rng.choice(SPACES) * rng.randint(1, 3)
    if kind == 4:
        return rng.choice(CODE)
    if kind == 5:
        return rng.choice(ODD)
    if kind == 6 and specials:
        s = rng.choice(specials)
        return rng.choice(["", " ", "  ", "x", "\n"]) + s + rng.choice(["", " ", "y", "\n"])
    return str(rng.randint(0, 10 ** rng.randint(1, 12)))


def documents(corpus_path, specials=(), target_bytes=1_100_000, seed=1234):
    """Paragraphs of the corpus, each mixed with generated snippets, until
    `target_bytes` of UTF-8; the same documents for the same arguments."""
    rng = random.Random(seed)
    paras = [p for p in open(corpus_path, encoding="utf-8").read().split("\n\n") if p.strip()]
    specials = list(specials)
    docs, size, k = [], 0, 0
    while size < target_bytes:
        p = paras[k % len(paras)]
        k += 1
        words = p.split(" ")
        for _ in range(rng.randint(0, 6)):
            at = rng.randrange(len(words) + 1)
            words.insert(at, _snippet(rng, specials))
        doc = rng.choice(["", " ", "  ", "\n", "\t"]) + " ".join(words)
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    # Corner documents: empty-ish, only specials, only spaces, long words.
    docs += ["", " ", "\n", "a", "ab" * 300, "😀" * 50, "中" * 120,
             "".join(specials), " ".join(specials), "x" + "y".join(specials) + "z"]
    return docs


def raw_documents(seed=99):
    """Documents as bytes holding invalid UTF-8 (a stray continuation byte,
    a truncated sequence, an encoded surrogate, a code point past U+10FFFF,
    an overlong form), to be read as Python's decode(errors="replace") does."""
    rng = random.Random(seed)
    bad = [b"\xff", b"\x80", b"\xc3(", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
           b"\xc0\xaf", b"\xf0\x9f\x98", b"\xfe\xfe"]
    out = []
    for _ in range(40):
        parts = [rng.choice([b"caf", b"na", "日本".encode(), b"ok ", b"  ", b"<s>"])
                 for _ in range(3)]
        parts.insert(rng.randrange(4), rng.choice(bad))
        out.append(b"".join(parts))
    return out
