"""MiniMind Studio in the browser: Corpus, Train, Chat and Export tabs and an
OpenAI-compatible API, all thin faces over the `minimind` library."""
