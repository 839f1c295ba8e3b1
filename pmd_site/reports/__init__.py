"""Reports about a running pmd: the status report every face shows, and the unsafe settings it warns about."""
