"""Renders docs/configuration.md from the broker config table.

    python -m kafkaclone.tools.config_doc           # print the document
    python -m kafkaclone.tools.config_doc --write   # rewrite docs/configuration.md
    python -m kafkaclone.tools.config_doc --check   # exit 1 if docs/configuration.md is stale

The whole document is generated from ``kafkaclone.server.config.BROKER_CONFIG`` and
``TOPIC_CONFIG_SYNONYMS``; a test checks the committed file against it, so the document
cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kafkaclone.server.config import (
    BROKER_CONFIG,
    TOPIC_CONFIG_SYNONYMS,
    ConfigKey,
    topic_config_synonyms,
)
from kafkaclone.tools.generated import generated_file_main

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

INTRO = """\
# Broker configuration

<!-- Generated from kafkaclone/server/config.py by
     python -m kafkaclone.tools.config_doc --write. Do not edit by hand. -->

A kafkaclone broker reads Apache Kafka 2.8's `server.properties`: the same keys, meanings and
defaults, so a file from a Kafka install mostly just works.

    scripts/kafka-server-start.sh config/server.properties --override broker.id=1

- The file is a Java properties file (`key=value`, `key: value` or `key value`; `#` and `!`
  comments; a trailing backslash continues a line). Every `--override key=value` is applied
  on top of it.
- A key this page does not list is logged as a warning and ignored.
- A value of the wrong type or out of range, or settings that contradict each other (such as
  an `advertised.listeners` name missing from `listeners`), stop the broker with a one-line
  message naming the key, the value and what is allowed.
- Where one setting has several units, the finer one wins, as in Kafka: `log.retention.ms`
  over `log.retention.minutes` over `log.retention.hours`, `log.roll.ms` over
  `log.roll.hours` (the same for jitter), `log.flush.interval.ms` over
  `log.flush.scheduler.interval.ms`, and `log.dirs` over `log.dir`.
- `listeners` defaults to `PLAINTEXT://host.name:port` (that is, `PLAINTEXT://:9092`) and
  `advertised.listeners` to `listeners`.
- The cluster id is not a setting: it is created once in ZooKeeper (`/cluster/id`) and
  recorded in each log directory's `meta.properties`.

Types are Kafka's: a `list` is comma-separated, a `long` is a 64-bit integer; a default of
`null` means "not set" (the description says what applies then). Rows marked
**kafkaclone** say where kafkaclone differs from Kafka.
"""


def _cell(text: str) -> str:
    """Table-cell safe Markdown: no pipes, no HTML tags, no emphasis from __names."""
    for raw, escaped in (("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("__", "\\_\\_"), ("\n", " ")):
        text = text.replace(raw, escaped)
    return text


def _default(key: ConfigKey) -> str:
    text = key.format(key.default)
    if text is None:
        return "null"
    if text == "":
        return '""'
    return f"`{text}`"


def _description(key: ConfigKey) -> str:
    text = key.doc
    if key.note:
        text += f" **kafkaclone:** {key.note}"
    return _cell(text)


def render_group(group: str) -> str:
    lines = [
        f"## {group}",
        "",
        "| Name | Type | Default | Valid values | Importance | Description |",
        "|---|---|---|---|---|---|",
    ]
    for key in BROKER_CONFIG:
        if key.group != group:
            continue
        valid = _cell(key.validator.describe()) if key.validator is not None else ""
        lines.append(
            f"| `{key.name}` | {key.type.name.lower()} | {_default(key)} | {valid} "
            f"| {key.importance.value} | {_description(key)} |"
        )
    return "\n".join(lines)


def render_synonyms() -> str:
    lines = [
        "## Topic-level configs and their broker defaults",
        "",
        "A topic config (set with `kafka-configs.sh --entity-type topics`, or in CreateTopics)",
        "overrides the broker setting that supplies its default. DescribeConfigs lists the",
        "chain as synonyms: the topic's own value (DYNAMIC_TOPIC_CONFIG), then each broker",
        "setting that is set (STATIC_BROKER_CONFIG), then the default (DEFAULT_CONFIG).",
        "",
        "| Topic config | Broker settings, highest priority first |",
        "|---|---|",
    ]
    for topic_config in TOPIC_CONFIG_SYNONYMS:
        chain = ", ".join(f"`{name}`" for name in topic_config_synonyms(topic_config))
        lines.append(f"| `{topic_config}` | {chain} |")
    return "\n".join(lines)


def render_document() -> str:
    groups = BROKER_CONFIG.groups()
    contents = "\n".join(
        f"- [{group}](#{group.lower().replace(' ', '-')})" for group in groups
    )
    sections = [
        INTRO,
        f"{len(BROKER_CONFIG)} settings, by group:\n\n{contents}\n"
        "- [Topic-level configs and their broker defaults]"
        "(#topic-level-configs-and-their-broker-defaults)\n",
        *(render_group(group) + "\n" for group in groups),
        render_synonyms() + "\n",
    ]
    return "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    return generated_file_main(argv, path=DOC, render=render_document,
                               tool="kafkaclone.tools.config_doc",
                               description=__doc__.splitlines()[0] if __doc__ else None)


if __name__ == "__main__":
    sys.exit(main())
