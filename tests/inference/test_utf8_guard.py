"""Utf8Guard: sampled byte-level tokens always form strict UTF-8, even when the budget runs out."""

import codecs

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from minimind.checkpoint import load_tokenizer_for
from minimind.byte_level import bytes_to_unicode
from minimind.inference.utf8 import Utf8Guard
from minimind.tokenizer import IM_END
from helpers import ROOT

SHIPPED = ["minimind-tang", "minimind-shakespeare"]
TO_BYTE = {char: byte for byte, char in bytes_to_unicode().items()}


@pytest.fixture(scope="module", params=SHIPPED)
def shipped(request):
    return load_tokenizer_for(ROOT / "checkpoints" / request.param)


@pytest.fixture(scope="module")
def tang():
    return load_tokenizer_for(ROOT / "checkpoints" / "minimind-tang")


def token_bytes(tok) -> list[bytes | None]:
    """Bytes of every token id (None for special tokens), straight from the vocabulary strings."""
    special = set(tok.all_special_ids)
    return [None if i in special else bytes(TO_BYTE[c] for c in tok.convert_ids_to_tokens(i))
            for i in range(len(tok))]


def byte_ids(tok) -> list[int]:
    """The token id of each single byte 0..255 (a byte-level vocabulary has all of them)."""
    table = bytes_to_unicode()
    return [tok.convert_tokens_to_ids(table[b]) for b in range(256)]


def oracle_need(data: bytes) -> int | None:
    """Bytes still missing after `data` under strict UTF-8, or None if no completion exists.

    Python's decoder rejects invalid bytes as it goes; a pending tail is completable iff
    padding it with all-0x80 or all-0xBF decodes (each legal range holds one of the two)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(data, final=False)
    except UnicodeDecodeError:
        return None
    tail = decoder.getstate()[0]
    if not tail:
        return 0
    need = (2 if tail[0] < 0xE0 else 3 if tail[0] < 0xF0 else 4) - len(tail)
    for fill in (b"\x80", b"\xbf"):
        try:
            (tail + fill * need).decode("utf-8")
            return need
        except UnicodeDecodeError:
            pass
    return None


def reach(guard, ids, prefix: bytes):
    state = guard.start
    for b in prefix:
        state = guard.advance(state, ids[b])
    return state


def as_list(mask, size):
    return [True] * size if mask is None else mask.tolist()


def test_byte_table_is_gpt2s_and_matches_the_tokenizer(tang):
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert (table[ord("a")], table[32], table[10], table[0], table[0x7F], table[0xAD]) == ("a", "Ġ", "Ċ", "Ā", "ġ", "Ń")
    # Every token whose bytes are whole characters decodes to exactly those characters.
    for i, data in enumerate(token_bytes(tang)):
        if data is not None and oracle_need(data) == 0 and b"\x00" not in data:
            assert tang.decode([i]) == data.decode("utf-8"), i


def test_shipped_tokenizers_get_a_guard_that_only_masks_impossible_starts(shipped):
    guard = Utf8Guard.for_tokenizer(shipped, len(shipped))
    assert guard is not None and not guard.pending(guard.start)
    mask = guard.allowed(guard.start, 1000)
    assert mask is guard.allowed(guard.start, 50)  # cached: no per-call work on the fast path
    expected = [data is None or oracle_need(data) is not None for data in token_bytes(shipped)]
    assert as_list(mask, len(shipped)) == expected
    # What is masked at the start is only bytes no UTF-8 text can begin with.
    assert 0 < expected.count(False) < 200


def test_padding_rows_beyond_the_vocab_are_never_allowed(tang):
    n = len(tang)
    guard = Utf8Guard.for_tokenizer(tang, n + 64)
    ids = byte_ids(tang)
    for prefix in [b"", b"\xe5", b"\xf0\x90"]:
        state = reach(guard, ids, prefix)
        for remaining in (1, 2, 3, 4, 100):
            mask = guard.allowed(state, remaining)
            assert mask.shape == (n + 64,) and mask.dtype == torch.bool
            assert not mask[n:].any() and mask[:n].any()
    with pytest.raises(ValueError):
        guard.advance(guard.start, n + 1)
    small = Utf8Guard.for_tokenizer(tang, 300)  # a model smaller than its tokenizer: masks fit the model
    assert small.allowed(small.start, 100).shape == (300,)


PREFIXES = [b"", b"\xc2", b"\xdf", b"\xe0", b"\xe1", b"\xe5", b"\xec", b"\xed", b"\xee", b"\xef",
            b"\xf0", b"\xf1", b"\xf3", b"\xf4", b"\xe0\xa0", b"\xe0\xbf", b"\xed\x80", b"\xed\x9f",
            b"\xe5\x80", b"\xf0\x90", b"\xf0\xbf", b"\xf1\x80", b"\xf4\x80", b"\xf4\x8f",
            b"\xf0\x90\x80", b"\xf2\xbf\xbf", b"\xf4\x8f\xbf"]


def test_every_mask_matches_a_strict_utf8_oracle(tang):
    guard = Utf8Guard.for_tokenizer(tang, len(tang))
    ids, tokens = byte_ids(tang), token_bytes(tang)
    states = set()
    for prefix in PREFIXES:
        state = reach(guard, ids, prefix)
        states.add(state)
        assert guard.pending(state) == bool(prefix)
        complete = oracle_need(prefix) == 0
        needs = [(0 if complete else None) if data is None else oracle_need(prefix + data) for data in tokens]
        for remaining in (1, 2, 3, 4, 5, 40):
            want = [need is not None and need <= remaining - 1 for need in needs]
            assert as_list(guard.allowed(state, remaining), len(tang)) == want, (prefix, remaining)
    assert len(states) == 8  # complete, 1 state for 2-byte, 3 for 3-byte, 3 for 4-byte characters


def test_lead_bytes_restrict_the_next_byte_exactly(tang):
    guard = Utf8Guard.for_tokenizer(tang, len(tang))
    ids = byte_ids(tang)

    def next_bytes(prefix):
        mask = guard.allowed(reach(guard, ids, prefix), 10)
        return [b for b in range(256) if mask[ids[b]]]

    assert next_bytes(b"\xe5") == list(range(0x80, 0xC0))
    assert next_bytes(b"\xc3") == list(range(0x80, 0xC0))
    assert next_bytes(b"\xed") == list(range(0x80, 0xA0))  # no surrogates
    assert next_bytes(b"\xe0") == list(range(0xA0, 0xC0))  # no overlong forms
    assert next_bytes(b"\xf0") == list(range(0x90, 0xC0))
    assert next_bytes(b"\xf4") == list(range(0x80, 0x90))  # nothing above U+10FFFF
    assert next_bytes(b"\xf4\x8f") == list(range(0x80, 0xC0))
    starts = next_bytes(b"")
    assert starts == [*range(0x00, 0x80), *range(0xC2, 0xF5)]
    never = [0xC0, 0xC1, *range(0xF5, 0x100)]
    for prefix in PREFIXES:
        state = reach(guard, ids, prefix)
        for remaining in (1, 2, 4, 100):
            mask = guard.allowed(state, remaining)
            assert not any(mask[ids[b]] for b in never), (prefix, remaining)


def test_special_tokens_only_between_characters(tang):
    guard = Utf8Guard.for_tokenizer(tang, len(tang))
    im_end = tang.convert_tokens_to_ids(IM_END)
    ids = byte_ids(tang)
    for remaining in (1, 2, 100):
        assert guard.allowed(guard.start, remaining)[im_end]
    assert guard.advance(guard.start, im_end) == guard.start
    pending = guard.advance(guard.start, ids[0xE5])
    for remaining in (1, 2, 3, 100):
        mask = guard.allowed(pending, remaining)
        assert not any(mask[i] for i in tang.all_special_ids)
    with pytest.raises(ValueError):
        guard.advance(pending, im_end)


def test_budget_rule_on_a_hand_made_vocabulary():
    vocab = [None, b"a", b"\xe5", b"\x80", b"\x80\x80", b"\x80\x80\xc3", b"\x80\x80\xe5", b"\xe5\x80",
             b"\xe5\x80\x80", b"\xf0\x90", b"", b"\xc0", b"\xf0", b"\x80\xc3"]
    names = ["<special>", "a", "E5", "80", "8080", "8080C3", "8080E5", "E580", "E58080", "F090", "empty", "C0",
             "F0", "80C3"]
    guard = Utf8Guard(vocab, special={0}, vocab_size=len(vocab) + 2)

    def allowed(state, remaining):
        mask = as_list(guard.allowed(state, remaining), len(vocab) + 2)
        assert mask[len(vocab):] == [False, False]
        return {name for name, ok in zip(names, mask) if ok}

    complete = guard.start
    # Last token: it must not end mid-character.
    assert allowed(complete, 1) == {"<special>", "a", "E58080"}
    assert allowed(complete, 2) == {"<special>", "a", "E58080", "E580"}  # 1 byte left: one more token
    assert allowed(complete, 3) == {"<special>", "a", "E58080", "E580", "E5", "F090"}
    assert allowed(complete, 4) == allowed(complete, 100) == {"<special>", "a", "E58080", "E580", "E5", "F090", "F0"}
    # After a 3-byte lead: 2 bytes needed.
    lead = guard.advance(complete, 2)
    assert guard.pending(lead)
    assert allowed(lead, 1) == {"8080"}  # defensive: only finishing now (a guarded walk never gets here)
    assert allowed(lead, 2) == {"80", "8080", "8080C3"}  # leaves <= 1 byte for the last token
    assert allowed(lead, 3) == {"80", "8080", "8080C3", "8080E5"}
    one = guard.advance(lead, 3)
    assert allowed(one, 1) == {"80"} and not guard.pending(guard.advance(one, 3))
    assert allowed(one, 2) == {"80", "80C3"}  # "8080" would be a 4th byte for a 3-byte character
    for bad in (10, 11, len(vocab) + 1):
        with pytest.raises(ValueError):
            guard.advance(complete, bad)


def walk(guard, generator, length, mode, kinds, cache):
    """Sample `length` tokens under the guard; `mode` prefers a kind of token 80% of the time."""
    state, chosen, pending_steps = guard.start, [], 0
    for step in range(length):
        mask = guard.allowed(state, length - step)
        key = (id(mask), mode)
        if key not in cache:  # candidate lists per distinct mask (masks are cached by the guard)
            allowed = torch.ones(guard.vocab_size, dtype=torch.bool) if mask is None else mask
            assert allowed.any(), "the guard left nothing to sample"
            everything = allowed.nonzero().flatten()
            cache[key] = (mask, everything, everything[torch.isin(everything, kinds[mode])])
        _, everything, preferred = cache[key]
        prefer = len(preferred) and float(torch.rand((), generator=generator)) < 0.8
        candidates = preferred if prefer else everything
        token = int(candidates[int(torch.randint(len(candidates), (), generator=generator))])
        state = guard.advance(state, token)
        chosen.append(token)
        pending_steps += guard.pending(state)
    return state, chosen, pending_steps


@pytest.mark.parametrize("name", SHIPPED)
def test_random_walks_always_decode_as_strict_utf8(name):
    tok = load_tokenizer_for(ROOT / "checkpoints" / name)
    guard = Utf8Guard.for_tokenizer(tok, len(tok) + 16)
    tokens = token_bytes(tok)
    lead_or_cont = [i for i, d in enumerate(tokens) if d is not None and len(d) == 1 and d[0] >= 0x80]
    ends_mid = [i for i, d in enumerate(tokens) if d is not None and oracle_need(d) not in (None, 0)]
    kinds = {"uniform": torch.tensor([], dtype=torch.long), "bytes": torch.tensor(lead_or_cont),
             "ends_mid": torch.tensor(ends_mid + lead_or_cont), "special": torch.tensor(tok.all_special_ids)}
    generator = torch.Generator().manual_seed(1234)
    modes = list(kinds)
    pending_seen, cache = 0, {}
    for n in range(300):
        length = 1 + n % 40
        state, chosen, pending_steps = walk(guard, generator, length, modes[n % len(modes)], kinds, cache)
        pending_seen += pending_steps
        assert not guard.pending(state)
        data = b"".join(tokens[i] or b"" for i in chosen)
        data.decode("utf-8")  # strict: raises on any invalid or unfinished byte sequence
        text = tok.decode(chosen, skip_special_tokens=False)
        assert "\ufffd" not in text, (chosen, text)
    assert pending_seen > 500  # the walks did spend time mid-character


def test_tokenizers_that_are_not_byte_level_get_no_guard():
    words = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    assert Utf8Guard.for_tokenizer(PreTrainedTokenizerFast(tokenizer_object=words), 3) is None

    bpe = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2, "▁": 3}, [("a", "b")]))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.decoder = decoders.Metaspace()
    assert Utf8Guard.for_tokenizer(PreTrainedTokenizerFast(tokenizer_object=bpe), 4) is None

    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()  # byte-level input is not enough: decoding decides
    bpe.decoder = None
    assert Utf8Guard.for_tokenizer(PreTrainedTokenizerFast(tokenizer_object=bpe), 4) is None
    assert Utf8Guard.for_tokenizer(object(), 4) is None  # e.g. a slow (pure Python) tokenizer


def test_a_raw_tokenizers_tokenizer_works_too(tang):
    raw = tang.backend_tokenizer
    guard = Utf8Guard.for_tokenizer(raw, raw.get_vocab_size())
    assert guard is not None
    ids = byte_ids(tang)
    assert not guard.allowed(guard.start, 100)[ids[0x80]]
    assert guard.allowed(guard.advance(guard.start, ids[0xE5]), 100)[ids[0x80]]
