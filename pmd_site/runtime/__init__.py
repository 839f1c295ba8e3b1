"""The embedded runtime behind `pmd up`: a process's start, the embedded PostgreSQL and Redis, the
supervisor that keeps them and the services alive, and the web server's HTTP protocol."""
