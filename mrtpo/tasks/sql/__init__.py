"""Text-to-SQL (paper §4): Spider-format data, a synthetic tiny-scale generator, verifiers, Z blocks, check regions.

One idea a module, in reading order:

* ``layout``: the prompt, and where a response's SQL and tags are;
* ``items``: a query's items as sqlglot parses them (the sub-verifiers' view);
* ``sandbox``: sandboxed execution of untrusted SQL on read-only SQLite databases;
* ``match``: Spider's rule for when two query results are the same (execution accuracy);
* ``spider``: Spider-format loaders (Spider, Spider-Syn, -Realistic, -DK, BIRD dev);
* ``synthetic``: the tiny scale's templated questions over small deterministic databases;
* ``task``: ``TextToSQL``, the rewards, Z blocks and check regions built from the above.
"""

from .task import TextToSQL

__all__ = ["TextToSQL"]
