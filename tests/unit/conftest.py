"""Fixtures shared by the unit tests."""

import pytest


@pytest.fixture
def record_keyword(monkeypatch):
    """``record_keyword(module, name, keyword)`` wraps ``module.name`` for the test and returns
    the list it fills with the value of ``keyword`` at every call (the schedule tests of the
    trainers read what each update was given)."""

    def install(module, name: str, keyword: str) -> list:
        seen, original = [], getattr(module, name)

        def recording(*args, **kwargs):
            seen.append(kwargs[keyword])
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
        return seen

    return install
