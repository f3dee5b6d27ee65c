"""Lightning's ``utilities.parsing`` and ``utilities.parameter_tying`` helpers: picklable
hyperparameters, constructor arguments read from the stack, the model/hparams/DataModule
attribute lookup tuners use, and tied parameters."""

from __future__ import annotations

import importlib.util
import inspect
import pickle
import threading
import warnings
from argparse import Namespace
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

import trainkit
from trainkit.core.hyperparameters import AttributeDict
from trainkit.lightning.utilities import parsing
from trainkit.lightning.utilities.parameter_tying import (
    find_shared_parameters,
    set_shared_parameters,
)
from trainkit.lightning.utilities.parsing import (
    clean_namespace,
    collect_init_args,
    get_init_args,
    is_picklable,
    lightning_getattr,
    lightning_hasattr,
    lightning_setattr,
    parse_class_init_keys,
)

from ..helpers import QUIET, BlobData, Classifier, blobs, loader

LIGHTNING = importlib.util.find_spec("lightning") is not None


class Refuses:
    """An object whose pickling fails with an error of its own."""

    def __reduce__(self) -> Any:
        raise ValueError("not this one")


def test_is_picklable_says_whether_pickle_dumps_succeeds() -> None:
    assert is_picklable({"lr": 0.1, "layers": [2, 3]}) and is_picklable(torch.ones(2))
    assert not is_picklable(lambda x: x)
    assert not is_picklable(threading.Lock())
    assert not is_picklable(i for i in range(2))
    assert not is_picklable(Refuses())  # any error while pickling is a "no"


def test_clean_namespace_drops_what_cannot_be_pickled_with_a_warning() -> None:
    hparams = AttributeDict(lr=0.1, activation=lambda x: x, lock=threading.Lock())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clean_namespace(hparams)
    assert hparams == {"lr": 0.1}
    pickle.dumps(hparams)  # what is left can go into a checkpoint
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and all(w.category is UserWarning for w in caught)
    assert "removed 'activation'" in messages[0]
    assert "save_hyperparameters(ignore=['activation'])" in messages[0]
    assert caught[0].filename == __file__  # the warning names the line that called it

    namespace = Namespace(lr=0.1, activation=lambda x: x)
    with pytest.warns(UserWarning, match="removed 'activation'"):
        clean_namespace(namespace)
    assert vars(namespace) == {"lr": 0.1}


def test_parse_class_init_keys_names_self_args_and_kwargs() -> None:
    class Net:
        def __init__(this, width: int, *layers: str, depth: int = 2, **options: Any) -> None:
            pass

    class Plain:
        def __init__(self, width: int, /, depth: int) -> None:
            pass

    class Inherited:
        pass

    assert parse_class_init_keys(Net) == ("this", "layers", "options")
    assert parse_class_init_keys(Plain) == ("self", None, None)
    assert parse_class_init_keys(Inherited) == ("self", "args", "kwargs")  # object.__init__


def test_get_init_args_reads_the_running_inits_arguments() -> None:
    class Net:
        def __init__(self, width: int, *layers: str, depth: int = 2, **options: Any) -> None:
            width = width * 10  # the value read is the one the variable holds now
            self.init_args = get_init_args(inspect.currentframe())

    net = Net(4, "conv", "pool", activation="relu")
    # *args has no names to go by; **kwargs entries come by their own names.
    assert net.init_args == {"width": 40, "depth": 2, "activation": "relu"}
    assert get_init_args(inspect.currentframe()) == {}  # a test function is no __init__
    assert get_init_args(None) == {}


class Base:
    def __init__(self, width: int, **options: Any) -> None:
        super().__init__()
        self.chain = collect_init_args(inspect.currentframe(), [])
        self.bases_only = collect_init_args(inspect.currentframe(), [], classes=(Base,))


class Net(Base):
    def __init__(self, depth: int, width: int = 8) -> None:
        super().__init__(width * 2, activation="relu")


class Holder:
    """Builds a Net in its own ``__init__``."""

    def __init__(self, size: int) -> None:
        self.net = Net(size)


def test_collect_init_args_collects_one_objects_constructors_base_first() -> None:
    net = Net(3)
    assert net.chain == [{"width": 16, "activation": "relu"}, {"depth": 3, "width": 8}]
    # The object that builds a Net is not part of the Net's hierarchy.
    assert Holder(5).net.chain == [{"width": 16, "activation": "relu"}, {"depth": 5, "width": 8}]
    assert net.bases_only == net.chain
    path: list[dict[str, Any]] = [{"given": 1}]
    assert collect_init_args(inspect.currentframe(), path) is path  # appended to, returned
    assert path == [{"given": 1}]  # no __init__ on the stack here
    # inside=True: the first frame that is no __init__ ends the search.
    assert collect_init_args(inspect.currentframe(), [], inside=True) == []

    class Other:
        def __init__(self, flag: bool) -> None:
            self.chain = collect_init_args(inspect.currentframe(), [], classes=(Base,))

    assert Other(True).chain == []  # only constructors of instances of `classes` count


class Tunable(Classifier):
    """A Classifier that reads ``batch_size`` wherever Lightning's lookup finds it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.seen.append(lightning_getattr(self, "batch_size"))
        return super().training_step(batch, batch_idx)


class Attributes(Classifier):
    lr: float  # an attribute once a test sets it; until then in hparams only

    def __init__(self) -> None:
        super().__init__(lr=0.25)
        self.width = 16


def test_hparams_that_are_a_namespace_hold_values_as_attributes() -> None:
    # Lightning's rule: any hparams that answers `in` (code written for an old
    # Lightning sets an argparse.Namespace).
    from argparse import Namespace

    class OldStyle(trainkit.Module):
        hparams = Namespace(learning_rate=0.01)  # type: ignore[assignment]

    model = OldStyle()
    assert lightning_hasattr(model, "learning_rate")
    assert lightning_getattr(model, "learning_rate") == 0.01
    lightning_setattr(model, "learning_rate", 0.5)
    assert model.hparams.learning_rate == 0.5 and not lightning_hasattr(model, "momentum")


def test_lightning_getattr_reads_the_model_then_its_hparams() -> None:
    model = Attributes()
    assert lightning_hasattr(model, "lr") and lightning_getattr(model, "lr") == 0.25
    assert lightning_getattr(model, "width") == 16
    lightning_setattr(model, "lr", 0.5)
    assert model.hparams.lr == 0.5 and not hasattr(model, "lr")  # set where it is, only
    model.lr = 0.5
    lightning_setattr(model, "lr", 0.1)
    assert model.lr == 0.1 and model.hparams.lr == 0.1  # every holder gets the value

    assert not lightning_hasattr(model, "batch_size")  # no Trainer, so no DataModule
    with pytest.raises(
        AttributeError,
        match=r"^batch_size is neither stored in the model namespace nor the `hparams` "
        r"namespace/dict, nor the datamodule: 'batch_size' is neither an attribute of "
        r"Attributes.*self\.batch_size = ",
    ):
        lightning_getattr(model, "batch_size")
    with pytest.raises(AttributeError, match="Store it in one of these places"):
        lightning_setattr(model, "batch_size", 8)


def test_lightning_getattr_finds_the_datamodules_attribute_during_and_after_fit() -> None:
    model, data = Tunable(), BlobData(batch_size=32)
    trainkit.Trainer(max_steps=2, limit_val_batches=1, **QUIET).fit(model, datamodule=data)
    assert model.seen == [32, 32]  # read from the DataModule while training
    assert lightning_hasattr(model, "batch_size") and lightning_getattr(model, "batch_size") == 32

    lightning_setattr(model, "batch_size", 64)
    assert data.batch_size == 64 and not hasattr(model, "batch_size")
    # Where several places hold it, the DataModule's value is the one read (its
    # dataloaders use it); setting writes every place.
    model.hparams.batch_size = 16
    assert lightning_getattr(model, "batch_size") == 64
    data.hparams.batch_size = 128
    assert lightning_getattr(model, "batch_size") == 128
    lightning_setattr(model, "batch_size", 8)
    assert (model.hparams.batch_size, data.batch_size, data.hparams.batch_size) == (8, 8, 8)

    plain = Classifier()  # fitted on dataloaders: the Trainer has no DataModule
    trainkit.Trainer(max_steps=1, **QUIET).fit(plain, loader(blobs(64), 32))
    assert not lightning_hasattr(plain, "batch_size")
    with pytest.raises(AttributeError, match="'batch_size' is neither an attribute of Classifier"):
        lightning_getattr(plain, "batch_size")


class TiedLM(nn.Module):
    """Input embedding and output projection share one weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(self.embed(tokens))))  # type: ignore[no-any-return]


def test_find_shared_parameters_lists_the_names_of_one_tensor() -> None:
    assert find_shared_parameters(TiedLM()) == [["embed.weight", "head.weight"]]
    assert find_shared_parameters(nn.Linear(4, 2)) == []
    layer = nn.Linear(2, 2)
    twice = nn.Sequential(layer, nn.ReLU(), layer)  # a module registered under two names
    assert find_shared_parameters(twice) == [["0.weight", "2.weight"], ["0.bias", "2.bias"]]


def test_set_shared_parameters_ties_again_after_a_load_with_assign() -> None:
    model = TiedLM()
    shared = find_shared_parameters(model)
    model.load_state_dict(TiedLM().state_dict(), assign=True)
    assert model.head.weight is not model.embed.weight  # the load made separate parameters

    assert set_shared_parameters(model, shared) is model
    assert model.head.weight is model.embed.weight
    assert len(list(model.parameters())) == 3  # the optimizer sees one weight, not two
    model(torch.tensor([1, 2])).sum().backward()
    assert model.embed.weight.grad is not None  # the head's gradient reaches the embedding

    untied = TiedLM()
    untied.head.weight = nn.Parameter(untied.head.weight.detach().clone())
    before = untied.head.weight
    with pytest.raises(AttributeError, match=r"TiedLM has no parameter 'embed\.wieght'"):
        set_shared_parameters(untied, [["head.weight", "embed.wieght"]])
    assert untied.head.weight is before  # a wrong list changes nothing
    with pytest.raises(AttributeError, match="wieght"):  # nor does a good list before it
        set_shared_parameters(untied, [["embed.weight", "head.weight"], ["embed.wieght"]])
    assert untied.head.weight is before


@pytest.mark.skipif(not LIGHTNING, reason="needs Lightning")
def test_the_same_inputs_give_lightnings_results() -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.utilities import parameter_tying as lightning_tying
    from lightning.pytorch.utilities import parsing as lightning_parsing

    values: list[Any] = [{"lr": 0.1}, torch.ones(2), lambda x: x, threading.Lock(), 3]
    assert [lightning_parsing.is_picklable(v) for v in values] == list(map(is_picklable, values))
    for cls in (TiedLM, Net, Base, Holder, Namespace):
        assert lightning_parsing.parse_class_init_keys(cls) == parse_class_init_keys(cls)

    def hierarchy(functions: ModuleType) -> Any:
        # Constructors that call super(), where Lightning finds the class they belong to.
        class First:
            def __init__(self, width: int, *layers: str, **options: Any) -> None:
                super().__init__()
                frame = inspect.currentframe()
                self.init_args = functions.get_init_args(frame)
                self.chain = functions.collect_init_args(frame, [])

        class Second(First):
            def __init__(self, depth: int, width: int = 8) -> None:
                super().__init__(width, "conv", activation="relu")

        return Second(3)

    theirs, ours = hierarchy(lightning_parsing), hierarchy(parsing)
    assert theirs.init_args == ours.init_args and theirs.chain == ours.chain

    for module in (TiedLM(), nn.Sequential(layer := nn.Linear(2, 2), layer), nn.Linear(2, 2)):
        assert lightning_tying.find_shared_parameters(module) == find_shared_parameters(module)

    def lookups(module_class: type, data_class: type, functions: ModuleType) -> list[Any]:
        model, data = module_class(), data_class()
        model.hparams.update(batch_size=16, lr=0.1)
        model.batch_size = 8
        data.batch_size = 32
        model._trainer = SimpleNamespace(datamodule=data)  # what the lookup reads of a Trainer
        read = [functions.lightning_getattr(model, name) for name in ("batch_size", "lr")]
        functions.lightning_setattr(model, "batch_size", 4)
        return [*read, model.batch_size, model.hparams.batch_size, data.batch_size]

    assert lookups(pl.LightningModule, pl.LightningDataModule, lightning_parsing) == lookups(
        trainkit.Module, trainkit.DataModule, parsing
    )
