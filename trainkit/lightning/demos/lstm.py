"""Lightning's ``lightning.pytorch.demos.lstm``: an LSTM language model that carries its state.

``SimpleLSTM`` is a word embedding, a stacked ``nn.LSTM`` and a decoder to
log-probabilities. ``SequenceSampler`` cuts a dataset into ``batch_size``
contiguous streams and makes batch ``i`` the ``i``-th block of every stream, so
each row of a batch continues the same row of the batch before: the hidden
state can be carried from batch to batch (detached: truncated backpropagation
through time). ``LightningLSTM`` trains the two on :class:`WikiText2` that way.
Constructors, attribute names and shapes are Lightning's.

Example:
    >>> list(SequenceSampler(range(10), batch_size=3))  # three streams of three blocks
    [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, Sampler

from trainkit.core.module import Module
from trainkit.lightning.demos.transformer import WIKITEXT2_VOCAB, WikiText2

__all__ = ["LightningLSTM", "SequenceSampler", "SimpleLSTM"]

Hidden = tuple[Tensor, Tensor]


class SimpleLSTM(nn.Module):
    """A word-level LSTM language model.

    Args:
        vocab_size: words in the vocabulary (WikiText2's by default).
        ninp: the embedding width.
        nhid: the LSTM's hidden width.
        nlayers: stacked LSTM layers.
        dropout: dropout on the embeddings, between layers and on the outputs.
    """

    def __init__(
        self,
        vocab_size: int = WIKITEXT2_VOCAB,
        ninp: int = 512,
        nhid: int = 512,
        nlayers: int = 4,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.nlayers = nlayers
        self.nhid = nhid
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab_size)
        self.init_weights()

    def init_weights(self) -> None:
        """Embedding and decoder weights uniform in [-0.1, 0.1], decoder bias zero."""
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
        """Log-probabilities of the next word at each position, and the new state.

        Args:
            input: ``[batch, seq]`` word ids.
            hidden: ``(h, c)``, each ``[nlayers, batch, nhid]`` (see :meth:`init_hidden`).

        Returns:
            ``[batch * seq, vocab_size]`` log-probabilities and the state after the
            last position.
        """
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        logits = self.decoder(self.drop(output)).reshape(-1, self.vocab_size)
        return F.log_softmax(logits, dim=1), hidden

    def init_hidden(self, batch_size: int) -> Hidden:
        """A zero state for ``batch_size`` rows, on the model's device and dtype."""
        weight = next(self.parameters())
        shape = (self.nlayers, batch_size, self.nhid)
        return weight.new_zeros(shape), weight.new_zeros(shape)


class SequenceSampler(Sampler[list[int]]):
    """Batches whose rows continue the rows of the batch before.

    The first ``batch_size * (len(dataset) // batch_size)`` indices are cut into
    ``batch_size`` contiguous streams of ``chunk_size`` indices; batch ``i`` takes
    the ``i``-th index of each stream. The remainder is not used.

    Args:
        dataset: what the indices index (only its length is read).
        batch_size: rows per batch (streams).
    """

    def __init__(self, dataset: Sized, batch_size: int) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"SequenceSampler(batch_size={batch_size}) must be at least 1.")
        self.dataset = dataset
        self.batch_size = batch_size
        self.chunk_size = len(dataset) // batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for position in range(self.chunk_size):
            yield [row * self.chunk_size + position for row in range(self.batch_size)]

    def __len__(self) -> int:
        return self.chunk_size


class LightningLSTM(Module):
    """:class:`SimpleLSTM` on :class:`WikiText2`, carrying its state across the batches of
    an epoch (detached at each batch); SGD with learning rate 20, as the demo has it.

    Args:
        vocab_size: the model's vocabulary (WikiText2's by default).
    """

    def __init__(self, vocab_size: int = WIKITEXT2_VOCAB) -> None:
        super().__init__()
        self.model = SimpleLSTM(vocab_size=vocab_size)
        self.hidden: Hidden | None = None

    def on_train_epoch_end(self) -> None:
        self.hidden = None  # the next epoch's streams start afresh

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        inputs, target = batch
        if self.hidden is None:
            self.hidden = self.model.init_hidden(inputs.size(0))
        state = (self.hidden[0].detach(), self.hidden[1].detach())
        output, self.hidden = self.model(inputs, state)
        loss = F.nll_loss(output, target.reshape(-1))
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def prepare_data(self) -> None:
        WikiText2(download=True)

    def train_dataloader(self) -> DataLoader[tuple[Tensor, Tensor]]:
        dataset = WikiText2()
        return DataLoader(dataset, batch_sampler=SequenceSampler(dataset, batch_size=20))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=20.0)
