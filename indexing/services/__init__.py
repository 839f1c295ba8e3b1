"""Writes: every change to collections, documents and contexts goes through here."""
