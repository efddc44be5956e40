"""sources.registry.PatchRegistry on plain Python owners: a class and a module-like object."""
import logging
import types

import pytest

from c10d_observer.sources.registry import PatchRegistry


def tagging(tag):
    """make_wrapper for the registry: a wrapper that records what it wrapped."""
    def make(orig):
        def wrapper(*args, **kwargs):
            return (tag, orig(*args, **kwargs))
        wrapper.wrapped = orig
        return wrapper
    return make


def make_class():
    class Owner(object):
        def method(self):
            return "method"

        @classmethod
        def klass(cls):
            return "klass"

        @staticmethod
        def static():
            return "static"

    return Owner


def make_module():
    mod = types.ModuleType("fake_module")

    def func(x):
        return x + 1

    mod.func = func
    mod.other = lambda: "other"
    return mod


@pytest.fixture
def registry():
    reg = PatchRegistry()
    yield reg
    reg.restore()


def test_wrap_installs_a_wrapper_on_a_class(registry):
    Owner = make_class()
    orig = vars(Owner)["method"]
    assert registry.wrap(Owner, "method", tagging("w")) is True
    assert Owner().method() == ("w", "method")
    assert Owner.method.wrapped is orig


def test_wrap_installs_a_wrapper_on_a_module(registry):
    mod = make_module()
    orig = mod.func
    assert registry.wrap(mod, "func", tagging("w")) is True
    assert mod.func(1) == ("w", 2)
    assert mod.func.wrapped is orig


@pytest.mark.parametrize("make_owner,name", [(make_class, "method"), (make_module, "func")])
def test_second_wrap_is_a_no_op(registry, make_owner, name):
    owner = make_owner()
    registry.wrap(owner, name, tagging("first"))
    first = vars(owner)[name]
    calls = []

    def make_again(orig):
        calls.append(orig)
        return tagging("second")(orig)

    assert registry.wrap(owner, name, make_again) is False
    assert calls == []
    assert vars(owner)[name] is first
    assert len(registry) == 1


@pytest.mark.parametrize("make_owner,names", [(make_class, ("method", "klass", "static")),
                                              (make_module, ("func", "other"))])
def test_restore_puts_back_the_exact_original_objects(make_owner, names):
    owner = make_owner()
    originals = {n: vars(owner)[n] for n in names}  # raw: the classmethod/staticmethod objects themselves
    reg = PatchRegistry()
    for n in names:
        reg.wrap(owner, n, tagging(n))
    assert all(vars(owner)[n] is not originals[n] for n in names)
    reg.restore()
    for n in names:
        assert vars(owner)[n] is originals[n]
    assert len(reg) == 0


def test_restore_runs_in_reverse_order():
    writes = []

    class Recording(object):
        """A module-like namespace that records every attribute write."""
        def __setattr__(self, name, value):
            writes.append(name)
            object.__setattr__(self, name, value)

    owner = Recording()
    owner.a = lambda: "a"
    owner.b = lambda: "b"
    owner.c = lambda: "c"
    reg = PatchRegistry()
    for n in ("a", "b", "c"):
        reg.wrap(owner, n, tagging(n))
    del writes[:]
    reg.restore()
    assert writes == ["c", "b", "a"]


def test_restore_deletes_an_attribute_that_was_inherited():
    Base = make_class()

    class Sub(Base):
        pass

    reg = PatchRegistry()
    reg.wrap(Sub, "method", tagging("sub"))
    assert "method" in vars(Sub)
    assert Sub().method() == ("sub", "method")
    reg.restore()
    assert "method" not in vars(Sub)
    assert Sub.method is Base.method
    assert Sub().method() == "method"


def test_wrapping_base_and_subclass_restores_both():
    Base = make_class()

    class Sub(Base):
        pass

    original = vars(Base)["method"]
    reg = PatchRegistry()
    reg.wrap(Base, "method", tagging("base"))
    reg.wrap(Sub, "method", tagging("sub"))
    assert Sub().method() == ("sub", ("base", "method"))
    reg.restore()
    assert "method" not in vars(Sub)
    assert vars(Base)["method"] is original


@pytest.mark.parametrize("make_owner,name", [(make_class, "method"), (make_module, "func")])
def test_restore_leaves_alone_what_someone_else_replaced(make_owner, name, caplog):
    owner = make_owner()
    reg = PatchRegistry()
    reg.wrap(owner, name, tagging("ours"))

    def theirs(*args):
        return "theirs"

    setattr(owner, name, theirs)
    with caplog.at_level(logging.WARNING, logger="c10d_observer"):
        reg.restore()
    assert vars(owner)[name] is theirs
    [rec] = [r for r in caplog.records if r.name == "c10d_observer"]
    assert rec.levelno == logging.WARNING
    assert name in rec.getMessage()
    assert "replaced our wrapper" in rec.getMessage()


def test_restore_of_a_clean_registry_logs_nothing(caplog):
    reg = PatchRegistry()
    mod = make_module()
    reg.wrap(mod, "func", tagging("w"))
    with caplog.at_level(logging.DEBUG, logger="c10d_observer"):
        reg.restore()
    assert [r for r in caplog.records if r.name == "c10d_observer"] == []


def test_wrap_again_after_restore():
    mod = make_module()
    orig = mod.func
    reg = PatchRegistry()
    reg.wrap(mod, "func", tagging("one"))
    reg.restore()
    assert reg.wrap(mod, "func", tagging("two")) is True
    assert mod.func(1) == ("two", 2)
    reg.restore()
    assert mod.func is orig
