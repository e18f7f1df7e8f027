"""docs/how-to/testing.md, followed as a reader does: in a fresh project (made as the
tutorial makes one, with the page's app ``shop``), the page's models, views, handler, URLs
and tests are written as shown, and its commands run: ``manage.py test`` runs the page's
``TestCase`` tests and ``pytest`` its pytest test, and every one of them passes."""

from __future__ import annotations

import os
import re

import pytest

from tests.acceptance.docs_page import DocsPage
from tests.acceptance.test_tutorial import project  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.skipif(
        os.environ.get("WATCHDOG_TEST_DB", "sqlite") != "sqlite",
        reason="the page's project runs on its own SQLite database, whatever the test database",
    ),
]


def test_the_testing_how_to_runs_as_written(project):  # noqa: F811 - the fixture
    page = DocsPage("how-to/testing.md")
    project.run("django-admin startproject mysite .")
    project.run("python manage.py startapp shop")
    settings = project.directory / "mysite" / "settings.py"
    # The page's project is the tutorial's (its SQLite settings), with its app named shop.
    settings.write_text(settings.read_text() + '\nINSTALLED_APPS += ["django_watchdog", "shop"]\n')
    (databases,) = [
        block
        for block in DocsPage("tutorial.md").step("2.").take_files()
        if block.code.startswith("DATABASES")
    ]
    project.write(databases)

    code = page.step("The code under test")
    for block in code.take_files():
        project.write(block)
    (makemigrations,) = code.take_commands()
    project.run(makemigrations.command)

    with_testcase = page.step("Test with `TestCase`")
    (tests_file,) = with_testcase.take_files()
    project.write(tests_file)
    (manage_test,) = with_testcase.take_commands()
    output = project.run(manage_test.command)
    assert "System check identified no issues" in output, output
    shown = len(re.findall(r"^    (?:async )?def test_", tests_file.code, re.M))
    assert f"Ran {shown} tests" in output and "\nOK" in output, output

    with_pytest = page.step("Test with pytest")
    for block in with_pytest.take_files():
        project.write(block)
    (run_pytest,) = with_pytest.take_commands()
    output = project.run(run_pytest.command, "-p", "no:cacheprovider")
    assert re.search(r"\b1 passed\b", output), output

    assert page.untaken() == []
