// pmd web UI: keyboard navigation of results, jump to the hit in a document, copy buttons, confirmations.
(function () {
  "use strict";

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function results() { return Array.from(document.querySelectorAll("#results .result")); }

  function activate(list, index) {
    list.forEach(function (el, i) { el.classList.toggle("active", i === index); });
    if (list[index]) list[index].scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var box = document.getElementById("q");
    if (event.key === "/" && !typing(document.activeElement) && box) {
      event.preventDefault();
      box.focus();
      box.select();
      return;
    }
    var list = results();
    if (!list.length) return;
    var current = list.findIndex(function (el) { return el.classList.contains("active"); });
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      if (typing(document.activeElement) && document.activeElement !== box) return;
      event.preventDefault();
      var next = event.key === "ArrowDown" ? Math.min(list.length - 1, current + 1) : Math.max(0, current - 1);
      activate(list, next);
    } else if (event.key === "Enter" && current >= 0 && (!typing(document.activeElement) || document.activeElement === box)) {
      event.preventDefault();
      window.location.href = list[current].dataset.href;
    } else if (event.key === "Escape" && current >= 0) {
      activate(list, -1);
    }
  });

  // A click anywhere on a result card opens it (links keep their own behaviour).
  document.addEventListener("click", function (event) {
    var card = event.target.closest && event.target.closest("#results .result");
    if (!card || event.target.closest("a, button, form") || window.getSelection().toString()) return;
    window.location.href = card.dataset.href;
  });

  // Typing a new query resets the keyboard selection.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "results") {
      activate(results(), -1);
      // A tag clicked in the results changed the query: the search box and date range follow it.
      var state = document.getElementById("search-state");
      if (state) {
        [["q", "query"], ["after", "after"], ["before", "before"]].forEach(function (pair) {
          var input = document.getElementById(pair[0]);
          if (input && input !== document.activeElement && input.value !== state.dataset[pair[1]]) {
            input.value = state.dataset[pair[1]];
          }
        });
      }
    }
  });

  // Search box completions (pmd_site/web/views/search.py search_suggestions): the filter key, tag or
  // value being typed. ↑ ↓ choose while the list is open, Enter or a click takes one, Escape closes.
  var suggestTimer = null, suggestAsked = 0;

  function suggestionList() { return document.getElementById("suggestions"); }

  function closeSuggestions() {
    var list = suggestionList(), box = document.getElementById("q");
    if (list) { list.hidden = true; list.textContent = ""; }
    if (box) box.setAttribute("aria-expanded", "false");
  }

  function takeSuggestion(item) {
    var box = document.getElementById("q");
    if (!box || !item) return;
    box.value = item.dataset.text;
    closeSuggestions();
    box.focus();
    // a whole value ends the filter: search with it; a key waits for its value
    if (!/:$/.test(box.value)) box.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function showSuggestions(found) {
    var list = suggestionList(), box = document.getElementById("q");
    if (!list || !box) return;
    list.textContent = "";
    found.forEach(function (s, i) {
      var item = document.createElement("li");
      item.setAttribute("role", "option");
      item.id = "suggestion-" + i;
      item.dataset.text = s.text;
      var label = document.createElement("span");
      label.className = "label";
      label.textContent = s.label;
      var hint = document.createElement("span");
      hint.className = "hint";
      hint.textContent = s.hint;
      item.appendChild(label);
      item.appendChild(hint);
      list.appendChild(item);
    });
    list.hidden = !found.length;
    box.setAttribute("aria-expanded", found.length ? "true" : "false");
  }

  document.addEventListener("input", function (event) {
    var box = event.target;
    if (!box || box.id !== "q" || !box.dataset.suggest) return;
    clearTimeout(suggestTimer);
    var text = box.value;
    if (!text || /\s$/.test(text)) { closeSuggestions(); return; }
    suggestTimer = setTimeout(function () {
      var asked = ++suggestAsked;
      var form = box.form, params = new URLSearchParams({ q: text });
      if (form && form.collection && form.collection.value) params.set("collection", form.collection.value);
      fetch(box.dataset.suggest + "?" + params.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : { suggestions: [] }; })
        .then(function (data) { if (asked === suggestAsked && box.value === text) showSuggestions(data.suggestions || []); })
        .catch(closeSuggestions);
    }, 120);
  });

  document.addEventListener("keydown", function (event) {
    var list = suggestionList();
    if (!list || list.hidden || event.target.id !== "q") return;
    var items = Array.from(list.children);
    var current = items.findIndex(function (el) { return el.classList.contains("active"); });
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      event.stopImmediatePropagation();
      var next = event.key === "ArrowDown" ? Math.min(items.length - 1, current + 1) : Math.max(0, current - 1);
      items.forEach(function (el, i) { el.classList.toggle("active", i === next); });
      event.target.setAttribute("aria-activedescendant", items[next] ? items[next].id : "");
    } else if (event.key === "Enter" && current >= 0) {
      event.preventDefault();
      event.stopImmediatePropagation();
      takeSuggestion(items[current]);
    } else if (event.key === "Escape") {
      closeSuggestions();
    }
  }, true);

  document.addEventListener("mousedown", function (event) {
    var item = event.target.closest && event.target.closest("#suggestions li");
    if (item) { event.preventDefault(); takeSuggestion(item); }
    else if (!(event.target.closest && event.target.closest("#q"))) closeSuggestions();
  });

  // Copy buttons: data-copy="<selector of the element whose text to copy>".
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.dataset.copy);
    if (!source) return;
    var text = source.textContent.trim();
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1200);
    };
    var fallback = function () {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
      done();
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback); // denied clipboard permission
    } else {
      fallback();
    }
  });

  // Tag facets behind "more": data-filter-tags="<selector of the list>" keeps the tags holding what is typed.
  function filterTags(box) {
    var list = document.querySelector(box.dataset.filterTags);
    if (!list) return;
    var wanted = box.value.trim().toLowerCase().replace(/^#/, "");
    list.querySelectorAll("li").forEach(function (item) {
      var link = item.querySelector("[data-tag]");
      item.hidden = !!wanted && (!link || link.dataset.tag.toLowerCase().indexOf(wanted) === -1);
    });
  }

  document.addEventListener("input", function (event) {
    var box = event.target.closest && event.target.closest("[data-filter-tags]");
    if (box) filterTags(box);
  });

  // New results replace the facets: an open "more tags" and what its filter box holds stay as they were
  // (a search answered while the user was filtering the tags must not undo the filter).
  var tagsOpen = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (!event.detail.target || event.detail.target.id !== "results") return;
    var details = document.querySelector("#results details.more-tags");
    var box = details && details.querySelector("[data-filter-tags]");
    tagsOpen = details && details.open ? { text: box ? box.value : "", focused: box && box === document.activeElement } : null;
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.detail.target || event.detail.target.id !== "results" || !tagsOpen) return;
    var details = document.querySelector("#results details.more-tags");
    var box = details && details.querySelector("[data-filter-tags]");
    if (details) details.open = true;
    if (box) {
      box.value = tagsOpen.text;
      filterTags(box);
      if (tagsOpen.focused) box.focus();
    }
    tagsOpen = null;
  });

  // Back and Forward bring back a search's results (htmx's history) and, from the address, the words
  // and choices of the form they were found with: the box never shows other words than its results'.
  function formFromAddress() {
    var form = document.getElementById("search-form");
    if (!form) return;
    var params = new URLSearchParams(window.location.search);
    ["q", "after", "before"].forEach(function (name) {
      var input = form.elements.namedItem(name);
      if (input) input.value = params.get(name) || "";
    });
    ["collection", "sort"].forEach(function (name) {
      var select = form.elements.namedItem(name);
      if (select) select.value = params.get(name) || select.options[0].value;
    });
    var mode = params.get("mode") || "keyword";
    form.querySelectorAll("input[name=mode]").forEach(function (radio) { radio.checked = radio.value === mode; });
  }
  document.addEventListener("htmx:historyRestore", formFromAddress);
  window.addEventListener("pageshow", function (event) { if (event.persisted) formFromAddress(); });

  // Forms that undo something ask first: data-confirm="<question>" (no inline handlers under the CSP).
  document.addEventListener("submit", function (event) {
    var form = event.target.closest && event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });

  // Documents: find the block holding line N (#L42 or ?line=42), mark it and scroll to it.
  function blockForLine(root, line) {
    var best = null;
    root.querySelectorAll("[data-ls]").forEach(function (el) {
      var start = +el.dataset.ls, end = +el.dataset.le;
      if (start <= line && line <= end) best = el; // later matches are nested deeper
    });
    if (!best) {
      root.querySelectorAll("[data-ls]").forEach(function (el) {
        if (+el.dataset.ls <= line) best = el;
      });
    }
    return best;
  }

  function markTerms(el, query) {
    var words = (query || "").toLowerCase().match(/[\p{L}\p{N}_]{2,}/gu);
    if (!words || !el) return;
    var pattern = new RegExp("(" + words.map(function (w) { return w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }).join("|") + ")", "giu");
    var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    nodes.forEach(function (node) {
      if (!pattern.test(node.nodeValue)) return;
      pattern.lastIndex = 0;
      var frag = document.createDocumentFragment();
      node.nodeValue.split(pattern).forEach(function (part, i) {
        if (i % 2) { var m = document.createElement("mark"); m.textContent = part; frag.appendChild(m); }
        else if (part) frag.appendChild(document.createTextNode(part));
      });
      node.parentNode.replaceChild(frag, node);
    });
  }

  function showLine() {
    var article = document.querySelector("article.document");
    if (!article) return;
    var match = /^#L(\d+)$/.exec(window.location.hash);
    var line = match ? +match[1] : +article.dataset.line;
    if (!line) return;
    var body = article.querySelector(".doc-body");
    var target = body.classList.contains("source") ? document.getElementById("L" + line) : blockForLine(body, line);
    if (!target && line <= +article.dataset.frontmatterLines) target = article.querySelector(".doc-meta .frontmatter");
    if (!target) return;
    body.querySelectorAll(".hit").forEach(function (el) { el.classList.remove("hit"); });
    target.classList.add("hit");
    markTerms(target, article.dataset.query);
    target.scrollIntoView({ block: "center" });
  }

  document.addEventListener("DOMContentLoaded", showLine);
  window.addEventListener("hashchange", showLine);
})();

// Ask mode: the answer arrives as server-sent events (pmd_site/web/views/ask.py): the passages, then
// the text as the model writes it, then the checked answer with its citations linked. Leaving the
// page or asking again closes the stream, which stops the model on the server.
(function () {
  "use strict";
  var open = null;

  function stop() {
    if (open) { open.close(); open = null; }
  }

  function start(root) {
    var box = (root || document).querySelector("[data-ask-stream]:not([data-started])");
    if (!box || typeof EventSource === "undefined") return;
    stop();
    box.setAttribute("data-started", "");
    var status = box.querySelector(".ask-status");
    var out = box.querySelector(".ask-answer");
    var source = new EventSource(box.getAttribute("data-ask-stream"));
    var begun = performance.now();
    open = source;
    source.addEventListener("passages", function (event) {
      var passages = JSON.parse(event.data);
      status.textContent = passages.length ? "Writing from " + passages.length + " passages…" : "Checking…";
    });
    source.addEventListener("token", function (event) {
      if (!out.dataset.first) {
        out.dataset.first = String(Math.round(performance.now() - begun));
      }
      out.appendChild(document.createTextNode(JSON.parse(event.data).text));
    });
    source.addEventListener("done", function (event) {
      stop();
      box.innerHTML = JSON.parse(event.data).html;
      box.classList.add("done");
      if (window.htmx) window.htmx.process(box);
    });
    source.onerror = function () {
      if (open !== source) return;
      stop();
      status.textContent = "The answer stopped: the connection was lost.";
    };
  }

  document.addEventListener("DOMContentLoaded", function () { start(document); });
  document.addEventListener("htmx:afterSwap", function (event) { start(event.target); });
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.target && event.target.id === "results") stop();
  });
  window.addEventListener("pagehide", stop);
})();
