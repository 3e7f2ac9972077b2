"""Reference solution for tasks/judged.yaml.

Shown to the llm_judge (include_reference: true) and used by reference_comparison.
Never shown to the agent.
"""

import re


def slugify(text: str) -> str:
    """Turn `text` into a URL slug.

    Lowercase ASCII letters and digits are kept; every other run of characters becomes
    a single hyphen; leading and trailing hyphens are removed.
    """
    text = text.lower()
    text = re.sub(r"[^a-z0-9]+", "-", text)
    return text.strip("-")
