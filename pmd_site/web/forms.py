"""Forms of the web UI: they only parse and validate input for the services."""

from __future__ import annotations

from django import forms

from indexing.language import LANGUAGES
from indexing.models import Collection

Visibility = Collection.Visibility

# The web UI's names of the search modes (mapped to a Mode by search.request.mode_normalize).
MODE_LABELS = {"keyword": "Keyword", "semantic": "Semantic", "hybrid": "Hybrid", "ask": "Ask"}
ASK = "ask"  # not a search mode: an answer written from the notes (pmd_site.web.views.ask)
SORT_LABELS = {"relevance": "Best match", "date": "Newest first"}
WEB_LIMIT = 20


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=1000, strip=True)
    mode = forms.ChoiceField(choices=list(MODE_LABELS.items()), required=False)
    collection = forms.CharField(required=False, max_length=200)
    sort = forms.ChoiceField(choices=list(SORT_LABELS.items()), required=False)
    # the date range facet (the note's date, as `after:`/`before:` in the query; ISO or relative)
    after = forms.CharField(required=False, max_length=40, strip=True)
    before = forms.CharField(required=False, max_length=40, strip=True)
    conversation = forms.UUIDField(required=False)  # Ask mode: the conversation a follow-up continues
    exact = forms.BooleanField(required=False)  # "search instead for …": no typo correction
    words = forms.BooleanField(required=False)  # time words ("last week") are words, not a date filter

    def __init__(self, *args, collection_names: list[str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.collection_names = collection_names or []

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or "keyword"

    def clean_sort(self) -> str:
        return self.cleaned_data.get("sort") or "relevance"

    def clean_collection(self) -> str:
        name = self.cleaned_data.get("collection") or ""
        if name and name not in self.collection_names:
            raise forms.ValidationError(f"there is no collection named '{name}'")
        return name


# The formats read besides markdown (indexing.convert.FORMAT_EXTENSIONS), as the forms offer them.
FORMAT_CHOICES = [
    ("pdf", "PDF"),
    ("docx", "Word"),
    ("pptx", "PowerPoint"),
    ("xlsx", "Excel"),
    ("html", "HTML"),
    ("epub", "EPUB"),
    ("text", "Text (.txt .rst .org)"),
]


class CollectionAddForm(forms.Form):
    path = forms.CharField(
        max_length=4096,
        label="Folder",
        help_text="Absolute path of a folder on the pmd server.",
        widget=forms.TextInput(attrs={"placeholder": "/srv/notes", "autocomplete": "off"}),
    )
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Defaults to the folder's name.",
        widget=forms.TextInput(attrs={"placeholder": "notes", "autocomplete": "off"}),
    )
    mask = forms.CharField(
        max_length=500,
        required=False,
        label="Files",
        help_text="Glob of files to index.",
        widget=forms.TextInput(attrs={"placeholder": "**/*.md", "autocomplete": "off"}),
    )
    formats = forms.MultipleChoiceField(
        label="Other formats",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=FORMAT_CHOICES,
        help_text="Read these besides markdown (leave Files empty: they make its glob).",
    )
    title_from = forms.ChoiceField(
        label="Titles",
        required=False,
        initial="",
        choices=[("", "Automatic"), ("heading", "From the first heading"), ("filename", "From the file name")],
        help_text="Automatic: file names in an Obsidian vault (a folder holding .obsidian/), else headings.",
    )
    transclude = forms.BooleanField(
        label="Find notes by what they embed",
        required=False,
        help_text="A note that embeds another (![[Note#Section]]) is found by the embedded words too.",
    )
    language = forms.ChoiceField(
        label="Language",
        initial="auto",
        required=False,
        choices=[("auto", "Detect from the notes")]
        + [(code, name) for code, (name, _) in LANGUAGES.items() if code != "mixed"],
        help_text="For stemming and stop words in keyword search.",
    )
    # Sharing with chosen groups and people is done on the collection's row once it exists.
    visibility = forms.ChoiceField(
        label="Who sees it",
        initial=Visibility.EVERYONE,
        required=False,
        choices=[(Visibility.EVERYONE, "Everyone signed in"), (Visibility.PRIVATE, "Only me (private)")],
        help_text="Share it with groups and people from its row once added.",
    )

    def clean_visibility(self) -> str:
        return self.cleaned_data.get("visibility") or Visibility.EVERYONE


class CollectionFormatsForm(forms.Form):
    """What a collection reads besides markdown: saved, it is indexed again."""

    formats = forms.MultipleChoiceField(
        label="Formats besides markdown", required=False, widget=forms.CheckboxSelectMultiple, choices=FORMAT_CHOICES
    )


class _PeopleAndGroups(forms.Form):
    """A form choosing among the groups and people of this pmd (the lists are the page's, not fixed)."""

    groups = forms.MultipleChoiceField(required=False, label="Groups")
    users = forms.MultipleChoiceField(required=False, label="People")

    def __init__(self, *args, groups: list[str], users: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["groups"].choices = [(g, g) for g in groups]
        self.fields["users"].choices = [(u, u) for u in users]
        self.fields["groups"].widget.attrs["size"] = min(6, max(2, len(groups)))
        self.fields["users"].widget.attrs["size"] = min(6, max(2, len(users)))


class CollectionShareForm(_PeopleAndGroups):
    """Who sees a collection: everyone, chosen groups and people, or only its owner."""

    visibility = forms.ChoiceField(label="Who sees it", choices=Visibility.choices, widget=forms.RadioSelect)
    field_order = ["visibility", "groups", "users"]

    def clean(self):
        """The radio decides: groups and people still selected count only for "chosen groups and people"."""
        cleaned = super().clean()
        if cleaned.get("visibility") != Visibility.SHARED:
            cleaned["groups"], cleaned["users"] = [], []
        return cleaned


class CollectionWritersForm(_PeopleAndGroups):
    """Who writes notes in a collection through pmd: nobody unless writable; then its owner,
    superusers and the chosen groups and people (among those who see it)."""

    writable = forms.BooleanField(required=False, label="Writable: notes may be written through pmd")
    groups = forms.MultipleChoiceField(required=False, label="Writer groups")
    users = forms.MultipleChoiceField(required=False, label="Writers")
    field_order = ["writable", "groups", "users"]


# Token lifetimes offered on the tokens page (indexing.services.tokens.parse_expiry reads the keys).
TOKEN_EXPIRY_CHOICES = [("", "Never"), ("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days"), ("1y", "1 year")]


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Name",
        help_text="What will use it, e.g. a script or an agent; shown in the list.",
        widget=forms.TextInput(attrs={"placeholder": "laptop agent", "autocomplete": "off"}),
    )
    can_write = forms.BooleanField(
        required=False,
        label="Allow changes (write)",
        help_text="Off: it can only read. On: it may change what you may change.",
    )
    collections = forms.MultipleChoiceField(
        required=False,
        label="Collections",
        help_text="None selected: every collection you can see.",
    )
    expires = forms.ChoiceField(choices=TOKEN_EXPIRY_CHOICES, initial="", required=False, label="Expires")

    def __init__(self, *args, collection_names: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collections"].choices = [(n, n) for n in collection_names]
        self.fields["collections"].widget.attrs["size"] = min(6, max(2, len(collection_names)))
