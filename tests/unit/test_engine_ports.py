"""The store the management command hands the worker provides what the engine's protocol
names, with the same signatures, so the fake store of the unit tests stays truthful."""

import inspect

from django_watchdog.engine.ports import EngineStore
from django_watchdog.store.worker_store import WorkerStore

from .test_engine import FakeStore


def protocol_methods():
    return sorted(
        name
        for name, value in vars(EngineStore).items()
        if callable(value) and not name.startswith("_")
    )


def test_the_worker_store_has_every_method_of_the_protocol_with_its_signature():
    assert len(protocol_methods()) == 19
    for name in protocol_methods():
        wanted = inspect.signature(getattr(EngineStore, name))
        given = inspect.signature(getattr(WorkerStore, name))
        assert list(given.parameters) == list(wanted.parameters), name
        for parameter in wanted.parameters.values():
            assert given.parameters[parameter.name].kind == parameter.kind, (name, parameter)
            # The store may default what the engine always passes (it has other callers).
            if parameter.default is not inspect.Parameter.empty:
                assert given.parameters[parameter.name].default == parameter.default, name


def test_the_fake_store_declares_the_protocol_and_implements_all_of_it():
    assert EngineStore in FakeStore.__mro__
    for name in protocol_methods():
        assert getattr(FakeStore, name) is not getattr(EngineStore, name), name
