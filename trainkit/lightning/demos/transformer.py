"""Lightning's ``lightning.pytorch.demos.transformer``: a small language model and its text.

Lightning's documentation and examples try features on a word-level language
model: ``Transformer`` (an encoder-decoder ``nn.Transformer`` between a word
embedding and a decoder to log-probabilities over the vocabulary), ``WikiText2``
(the WikiText-2 training text, read into ``(inputs, target)`` blocks whose target
is the input moved one word on) and ``LightningTransformer`` (the two as a
Module). The constructors, attribute names (so that state dicts are the same
keys) and shapes are Lightning's.

Two deliberate differences: the positional encoding adds each position its own
sinusoid (Lightning's demo adds the encoding of position ``seq_len`` to every
position), so a Lightning-trained demo model predicts differently here; and the
text is fetched with the standard library (no ``requests``), into a temporary
file renamed into place, with an error that says where to put the file when the
machine is offline.

Example:
    >>> model = Transformer(vocab_size=50, ninp=16, nhead=2, nhid=16, nlayers=1)
    >>> inputs = torch.randint(0, 50, (3, 7))
    >>> model(inputs, inputs).shape  # log-probabilities, one row per (sequence, position)
    torch.Size([21, 50])
"""

from __future__ import annotations

import math
import os
import urllib.request
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from trainkit.core.module import Module
from trainkit.utilities.io import atomic_write

__all__ = ["Dictionary", "LightningTransformer", "PositionalEncoding", "Transformer", "WikiText2"]

#: Where :meth:`WikiText2.download` fetches the text from (PyTorch's examples).
WIKITEXT2_URL = (
    "https://raw.githubusercontent.com/pytorch/examples/main/"
    "word_language_model/data/wikitext-2/train.txt"
)
#: WikiText2's vocabulary size, every model's default.
WIKITEXT2_VOCAB = 33278


class Transformer(nn.Module):
    """A word-level language model: embedding, ``nn.Transformer``, linear decoder.

    Args:
        vocab_size: words in the vocabulary (WikiText2's by default).
        ninp: the embedding (model) width.
        nhead: attention heads.
        nhid: the feed-forward width.
        nlayers: encoder layers, and as many decoder layers.
        dropout: dropout probability.
    """

    def __init__(
        self,
        vocab_size: int = WIKITEXT2_VOCAB,
        ninp: int = 200,
        nhead: int = 2,
        nhid: int = 200,
        nlayers: int = 2,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.ninp = ninp
        self.embedding = nn.Embedding(vocab_size, ninp)
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.transformer = nn.Transformer(
            d_model=ninp,
            nhead=nhead,
            num_encoder_layers=nlayers,
            num_decoder_layers=nlayers,
            dim_feedforward=nhid,
            dropout=dropout,
            batch_first=True,
        )
        self.decoder = nn.Linear(ninp, vocab_size)

    @staticmethod
    def generate_square_subsequent_mask(size: int) -> Tensor:
        """A ``size x size`` attention mask: 0 on and below the diagonal, -inf above it
        (no position sees a later one)."""
        return torch.full((size, size), -math.inf).triu(diagonal=1)

    def _embed(self, tokens: Tensor) -> Tensor:
        encoded: Tensor = self.pos_encoder(self.embedding(tokens) * math.sqrt(self.ninp))
        return encoded

    def forward(
        self, inputs: Tensor, target: Tensor | None = None, mask: Tensor | None = None
    ) -> Tensor:
        """Log-probabilities of the next word at each position of ``target``.

        Args:
            inputs: ``[batch, seq]`` word ids, read by the encoder.
            target: ``[batch, seq]`` word ids, read by the decoder (causally). None
                decodes ``inputs`` themselves, as older Lightning examples call it
                (``model(inputs)``).
            mask: the decoder's attention mask (default: causal, see
                :meth:`generate_square_subsequent_mask`).

        Returns:
            ``[batch * seq, vocab_size]`` log-probabilities, for
            ``F.nll_loss(output, target.view(-1))``.
        """
        if target is None:
            target = inputs
        if mask is None:
            mask = self.generate_square_subsequent_mask(target.size(1)).to(inputs.device)
        hidden = self.transformer(self._embed(inputs), self._embed(target), tgt_mask=mask)
        return F.log_softmax(self.decoder(hidden), dim=-1).view(-1, self.vocab_size)


class PositionalEncoding(nn.Module):
    """Adds each position's sinusoidal encoding, then dropout.

    The table is built on first use on the input's device and is not part of
    the state dict (it is a function of ``dim`` and ``max_len``).

    Args:
        dim: the model width.
        dropout: dropout probability.
        max_len: the longest sequence it encodes.
    """

    def __init__(self, dim: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dim = dim
        self.max_len = max_len
        self.dropout = nn.Dropout(p=dropout)
        self.pe: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        """``x`` (``[batch, seq, dim]``) plus the encoding of positions ``0 .. seq - 1``."""
        if x.size(1) > self.max_len:
            raise ValueError(
                f"PositionalEncoding: a sequence of {x.size(1)} positions is longer than "
                f"max_len={self.max_len}; build it with a larger max_len."
            )
        if self.pe is None or self.pe.device != x.device:
            self.pe = self.table(self.max_len, self.dim, x.device)
        encoded: Tensor = self.dropout(x + self.pe[: x.size(1)])
        return encoded

    @staticmethod
    def table(length: int, dim: int, device: torch.device | None = None) -> Tensor:
        """``[length, dim]``: sine in even columns, cosine in odd ones, with wavelengths
        from 2*pi to 10000*2*pi."""
        position = torch.arange(length, dtype=torch.float, device=device)[:, None]
        frequency = torch.exp(
            torch.arange(0, dim, 2, dtype=torch.float, device=device) * (-math.log(10000.0) / dim)
        )
        table = torch.zeros(length, dim, device=device)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)[:, : dim // 2]
        return table


class Dictionary:
    """Words and their ids, in the order they were first seen."""

    def __init__(self) -> None:
        self.word2idx: dict[str, int] = {}
        self.idx2word: list[str] = []

    def add_word(self, word: str) -> int:
        """The word's id (a new one the first time it is seen)."""
        index = self.word2idx.get(word)
        if index is None:
            index = self.word2idx[word] = len(self.idx2word)
            self.idx2word.append(word)
        return index

    def __len__(self) -> int:
        return len(self.idx2word)


def tokenize(path: str | os.PathLike[str]) -> tuple[Tensor, Dictionary]:
    """A text file as one int64 tensor of word ids (each line's words, then ``<eos>``).

    Args:
        path: the text file (UTF-8).

    Returns:
        The ids and the dictionary that maps them back to words.
    """
    dictionary = Dictionary()
    ids: list[int] = []
    with open(path, encoding="utf8") as file:
        for line in file:
            ids.extend(dictionary.add_word(word) for word in line.split())
            ids.append(dictionary.add_word("<eos>"))
    return torch.tensor(ids, dtype=torch.int64), dictionary


class WikiText2(Dataset[tuple[Tensor, Tensor]]):
    """WikiText-2's training text as ``(inputs, target)`` blocks of ``block_size`` words.

    Block ``i`` holds words ``i * block_size`` up to ``(i + 1) * block_size``; its
    target is the same span one word later. The text is ``data_dir/wikitext-2.txt``.

    Args:
        data_dir: the folder of ``wikitext-2.txt``.
        block_size: words per block.
        download: fetch the text if the file is not there (see :meth:`download`).

    Raises:
        FileNotFoundError: the file is missing and ``download`` is False.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] = Path("./data"),
        block_size: int = 35,
        download: bool = True,
    ) -> None:
        super().__init__()
        if block_size < 1:
            raise ValueError(f"WikiText2(block_size={block_size}) must be at least 1.")
        self.path = Path(data_dir) / "wikitext-2.txt"
        if download:
            self.download(self.path)
        elif not self.path.is_file():
            raise FileNotFoundError(
                f"WikiText2: {self.path} does not exist. Pass download=True to fetch it, or "
                f"save WikiText-2's train.txt ({WIKITEXT2_URL}) there."
            )
        self.data, self.dictionary = tokenize(self.path)
        self.block_size = block_size

    @property
    def vocab_size(self) -> int:
        """Distinct words in the text, ``<eos>`` included."""
        return len(self.dictionary)

    def __len__(self) -> int:
        # Every block needs one word after it for its target.
        return max(len(self.data) // self.block_size - 1, 0)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"WikiText2 has {len(self)} blocks; index {index} is out of range.")
        start = (index % len(self)) * self.block_size
        end = start + self.block_size
        return self.data[start:end], self.data[start + 1 : end + 1]

    @staticmethod
    def download(destination: str | os.PathLike[str]) -> None:
        """Fetch WikiText-2's training text to ``destination`` unless it is there already.

        The text goes to a temporary file renamed into place, so an interrupted
        download leaves no partial file behind.

        Raises:
            RuntimeError: the download failed (no network, say): the message says
                where to put the file by hand.
        """
        path = Path(destination)
        if path.is_file():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with urllib.request.urlopen(WIKITEXT2_URL, timeout=60) as response:
                text = response.read()
        except OSError as error:
            raise RuntimeError(
                f"WikiText2 could not download {WIKITEXT2_URL} ({error}). Save that file as "
                f"{path}, or run where the network is reachable."
            ) from error
        with atomic_write(path, "wb") as file:
            file.write(text)


class LightningTransformer(Module):
    """:class:`Transformer` trained on :class:`WikiText2` with SGD (learning rate 0.1).

    Args:
        vocab_size: the model's vocabulary (WikiText2's by default).
    """

    def __init__(self, vocab_size: int = WIKITEXT2_VOCAB) -> None:
        super().__init__()
        self.model = Transformer(vocab_size=vocab_size)

    def forward(self, inputs: Tensor, target: Tensor) -> Tensor:
        return self.model(inputs, target)  # type: ignore[no-any-return]

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        inputs, target = batch
        return F.nll_loss(self(inputs, target), target.reshape(-1))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=0.1)

    def prepare_data(self) -> None:
        WikiText2(download=True)

    def train_dataloader(self) -> DataLoader[tuple[Tensor, Tensor]]:
        return DataLoader(WikiText2())
