"""The data layer: the two puzzle tasks on their 61-token alphabet (`tasks`), the Austen
corpus read from Debian's R package without R (`rdata`, `corpus`, checked by SHA-256), the
character text task and its windows (`text`), and the counted n-gram baselines (`ngram`).
It may import the core (`paths`, `util`) and the model layer; it needs only the core (tokens
know nothing of the model, and the model nothing of the tasks)."""
