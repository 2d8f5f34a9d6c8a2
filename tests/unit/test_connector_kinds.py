"""What a kind declares, asked by the rest of the ledger instead of naming a tool: whether a
source must name an API key, and the tool's own page for an execution."""

from __future__ import annotations

import pytest

from flowledger.config import SourceConfig
from flowledger.connectors import registry
from flowledger.sync.connect import ConfigProblem, connector_settings
from tests.support.fakes import EVERY_KIND, fake_for


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_each_kind_builds_a_connector_that_names_it(kind: str) -> None:
    fake = fake_for(kind)
    assert registry.build(kind, fake.client(), fake.settings()).kind == kind


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_a_source_without_an_api_key_is_refused_only_by_a_kind_that_needs_one(kind: str) -> None:
    cfg = SourceConfig(name="tool", kind=kind, base_url="http://tool.test")
    declared = registry.KINDS[kind]
    if not declared.needs_api_key:
        assert connector_settings(cfg).api_key is None
        return
    with pytest.raises(ConfigProblem) as refused:
        connector_settings(cfg)
    assert str(refused.value) == (
        f"source tool has no api_key_env naming its {declared.title} API key"
    )


def test_an_n8n_execution_links_to_its_page_under_its_workflow() -> None:
    url = registry.execution_url("n8n", "https://n8n.example.com/", "wf-1", "7430")
    assert url == "https://n8n.example.com/workflow/wf-1/executions/7430"
    assert registry.execution_url("n8n", "https://n8n.example.com", None, "7430") is None


@pytest.mark.parametrize(
    ("kind", "base_url"),
    [("n8n", None), ("n8n", ""), ("airflow", "http://airflow.test"), ("zapier", "http://z")],
)
def test_no_link_without_a_base_url_or_a_page_the_kind_declares(
    kind: str, base_url: str | None
) -> None:
    assert registry.execution_url(kind, base_url, "wf-1", "7430") is None
