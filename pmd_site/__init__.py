"""pmd: hybrid search for markdown knowledge bases."""
