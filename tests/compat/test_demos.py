"""Lightning's language-model demos (``demos.Transformer``, ``WikiText2``, the LSTM ones)."""

from __future__ import annotations

import importlib
import importlib.util
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import torch

import trainkit
from trainkit.lightning.demos import (
    LightningLSTM,
    LightningTransformer,
    SequenceSampler,
    SimpleLSTM,
    Transformer,
    WikiText2,
)
from trainkit.lightning.demos.transformer import PositionalEncoding

from ..helpers import QUIET

TEXT = " = Valkyria = \n\n the war was long . the end \n a b c d e f g h i j k l m n o p q r s t\n"
LIGHTNING = importlib.util.find_spec("lightning") is not None


def write_text(folder: Path, text: str = TEXT * 6) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wikitext-2.txt").write_text(text, encoding="utf8")
    return folder


def test_wikitext2_reads_words_and_eos_into_shifted_blocks(tmp_path: Path) -> None:
    data = WikiText2(write_text(tmp_path, "a b a\n\nc b\n"), block_size=2, download=False)
    words = data.dictionary.idx2word
    assert words == ["a", "b", "<eos>", "c"] and data.vocab_size == 4
    eos = "<eos>"
    assert [words[i] for i in data.data.tolist()] == ["a", "b", "a", eos, eos, "c", "b", eos]
    assert data.data.dtype == torch.int64 and len(data) == 8 // 2 - 1
    inputs, target = data[1]
    assert inputs.tolist() == data.data[2:4].tolist() and target.tolist() == data.data[3:5].tolist()
    assert data[-1][0].tolist() == data[2][0].tolist()
    with pytest.raises(IndexError, match="3 blocks"):
        data[3]


def test_wikitext2_never_downloads_a_file_that_is_there_and_says_where_to_put_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offline(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert len(WikiText2(write_text(tmp_path / "here"))) > 0  # download=True, file present
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match="download=True"):
        WikiText2(missing, download=False)
    with pytest.raises(RuntimeError, match=r"wikitext-2\.txt"):
        WikiText2(missing)
    assert not any(missing.iterdir())  # no partial file left behind


def test_wikitext2_download_writes_the_fetched_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Response:
        def __enter__(self) -> Response:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def read(self) -> bytes:
            return TEXT.encode()

    asked: list[str] = []
    monkeypatch.setattr(
        urllib.request, "urlopen", lambda url, timeout: asked.append(url) or Response()
    )
    data = WikiText2(tmp_path / "data", block_size=4)
    assert asked[0].endswith("wikitext-2/train.txt") and len(asked) == 1
    assert (tmp_path / "data" / "wikitext-2.txt").read_text(encoding="utf8") == TEXT
    assert data.dictionary.idx2word[:2] == ["=", "Valkyria"]


def test_the_transformer_gives_causal_log_probabilities_per_position() -> None:
    torch.manual_seed(0)
    model = Transformer(vocab_size=30, ninp=16, nhead=2, nhid=32, nlayers=1, dropout=0.0).eval()
    inputs = torch.randint(0, 30, (2, 6))
    target = torch.randint(0, 30, (2, 6))
    output = model(inputs, target)
    assert output.shape == (12, 30)
    assert torch.allclose(output.exp().sum(-1), torch.ones(12), atol=1e-5)
    changed = target.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 30  # a later word: earlier positions see no change
    again = model(inputs, changed).view(2, 6, 30)
    assert torch.allclose(again[:, :4], output.view(2, 6, 30)[:, :4], atol=1e-5)
    assert not torch.allclose(again[:, 4], output.view(2, 6, 30)[:, 4])
    # Older Lightning examples call model(inputs): the inputs are decoded too.
    assert torch.equal(model(inputs), model(inputs, inputs))


def test_the_positional_encoding_gives_each_position_its_own_code() -> None:
    encode = PositionalEncoding(dim=7, dropout=0.0, max_len=10)
    same_word = torch.ones(1, 5, 7)
    encoded = encode(same_word)[0]
    assert len({tuple(row.tolist()) for row in encoded}) == 5  # five different positions
    assert torch.allclose(encoded[0], torch.ones(7) + torch.tensor([0.0, 1.0] * 3 + [0.0]))
    assert list(encode.state_dict()) == []  # a function of dim and max_len, not state
    with pytest.raises(ValueError, match="max_len"):
        encode(torch.ones(1, 11, 7))


def test_the_sequence_sampler_continues_each_row_in_the_next_batch() -> None:
    sampler = SequenceSampler(range(23), batch_size=4)
    batches = list(sampler)
    assert len(sampler) == len(batches) == 5
    assert batches[0] == [0, 5, 10, 15] and batches[1] == [1, 6, 11, 16]
    assert sorted(i for batch in batches for i in batch) == list(range(20))  # 3 left over
    with pytest.raises(ValueError, match="at least 1"):
        SequenceSampler(range(3), batch_size=0)


def test_the_demo_language_models_train_on_a_local_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_text(tmp_path / "data", TEXT * 60)  # 2040 words: two batches of 20 rows for the LSTM
    monkeypatch.chdir(tmp_path)  # the demos read ./data/wikitext-2.txt
    vocab = WikiText2(download=False).vocab_size
    torch.manual_seed(0)
    transformer = LightningTransformer(vocab_size=vocab)
    before = transformer.model.decoder.weight.detach().clone()
    trainer = trainkit.Trainer(max_steps=3, default_root_dir=tmp_path, **QUIET)
    trainer.fit(transformer)
    assert trainer.global_step == 3 and trainer.num_training_batches == len(WikiText2())
    assert not torch.equal(before, transformer.model.decoder.weight)

    lstm = LightningLSTM(vocab_size=vocab)
    seen: list[tuple[int, bool]] = []
    step = lstm.training_step

    def watched(batch: Any, batch_idx: int) -> torch.Tensor:
        seen.append((batch[0].size(0), lstm.hidden is None))
        return step(batch, batch_idx)

    monkeypatch.setattr(lstm, "training_step", watched)
    trainer = trainkit.Trainer(max_epochs=2, default_root_dir=tmp_path, **QUIET)
    trainer.fit(lstm)
    per_epoch = len(WikiText2(download=False)) // 20
    assert trainer.global_step == 2 * per_epoch
    # The state starts afresh at each epoch and is carried between its batches.
    assert seen == [(20, i == 0) for i in range(per_epoch)] * 2
    assert lstm.hidden is None and "train_loss" in trainer.callback_metrics


@pytest.mark.skipif(not LIGHTNING, reason="compares with Lightning, which is not installed")
def test_the_demos_match_lightnings_data_weights_and_names(tmp_path: Path) -> None:
    theirs = importlib.import_module("lightning.pytorch.demos")
    folder = write_text(tmp_path)
    ours_data = WikiText2(folder, block_size=5, download=False)
    their_data = theirs.WikiText2(folder, block_size=5, download=False)
    assert torch.equal(ours_data.data, their_data.data)
    assert ours_data.dictionary.idx2word == their_data.dictionary.idx2word
    assert len(ours_data) == len(their_data)
    assert all(torch.equal(a, b) for a, b in zip(ours_data[3], their_data[3], strict=True))
    assert list(SequenceSampler(range(23), 4)) == list(theirs.SequenceSampler(range(23), 4))

    torch.manual_seed(1)
    lstm = SimpleLSTM(vocab_size=40, ninp=8, nhid=8, nlayers=2).eval()
    torch.manual_seed(1)
    their_lstm = theirs.SimpleLSTM(vocab_size=40, ninp=8, nhid=8, nlayers=2).eval()
    state = lstm.state_dict()
    assert list(state) == list(their_lstm.state_dict())
    assert all(torch.equal(state[k], v) for k, v in their_lstm.state_dict().items())
    words = torch.randint(0, 40, (3, 4))
    ours, theirs_out = lstm(words, lstm.init_hidden(3)), their_lstm(words, lstm.init_hidden(3))
    assert torch.equal(ours[0], theirs_out[0])

    torch.manual_seed(2)
    transformer = Transformer(vocab_size=40, ninp=8, nhead=2, nhid=8, nlayers=1)
    torch.manual_seed(2)
    their_transformer = theirs.Transformer(vocab_size=40, ninp=8, nhead=2, nhid=8, nlayers=1)
    # The same parameters from the same seed, so checkpoints load either way.
    theirs_state = their_transformer.state_dict()
    assert list(transformer.state_dict()) == list(theirs_state)
    assert all(torch.equal(transformer.state_dict()[k], v) for k, v in theirs_state.items())
