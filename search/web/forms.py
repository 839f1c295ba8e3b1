"""Forms of the web UI: they only parse and validate input for the services."""

from __future__ import annotations

from django import forms

# The web UI's names of the search modes (mapped to a Mode by search.request.mode_normalize).
MODE_LABELS = {"keyword": "Keyword", "semantic": "Semantic", "hybrid": "Hybrid"}
WEB_LIMIT = 20


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=1000, strip=True)
    mode = forms.ChoiceField(choices=list(MODE_LABELS.items()), required=False)
    collection = forms.CharField(required=False, max_length=200)

    def __init__(self, *args, collection_names: list[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.collection_names = collection_names or []

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or "keyword"

    def clean_collection(self) -> str:
        name = self.cleaned_data.get("collection") or ""
        if name and name not in self.collection_names:
            raise forms.ValidationError(f"there is no collection named '{name}'")
        return name


class CollectionAddForm(forms.Form):
    path = forms.CharField(
        max_length=4096, label="Folder",
        help_text="Absolute path of a folder on the pmd server.",
        widget=forms.TextInput(attrs={"placeholder": "/srv/notes", "autocomplete": "off"}),
    )
    name = forms.CharField(
        max_length=200, required=False,
        help_text="Defaults to the folder's name.",
        widget=forms.TextInput(attrs={"placeholder": "notes", "autocomplete": "off"}),
    )
    mask = forms.CharField(
        max_length=500, required=False, label="Files",
        help_text="Glob of files to index.",
        widget=forms.TextInput(attrs={"placeholder": "**/*.md", "autocomplete": "off"}),
    )


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, label="Name",
        help_text="What will use it, e.g. a script or an agent; shown in the list.",
        widget=forms.TextInput(attrs={"placeholder": "laptop agent", "autocomplete": "off"}),
    )
