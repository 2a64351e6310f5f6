/*
 * chunk.c -- what the prompt must know about typed Lua text before it
 * compiles it: a small lexer (names, keywords, numbers, strings, long
 * brackets, comments, symbols) and one pass over its tokens that finds
 *   - whether the text can still become valid with more lines: an open
 *     block, bracket or long string, or a trailing operator (an
 *     unterminated short string cannot: a newline ends it, as in lua5.4);
 *   - the last top-level ";" with code after it ("out = net(x); out.shape"
 *     prints out.shape);
 *   - the names used as variables, and the top-level `local` statements,
 *     which the prompt rewrites into assignments to session variables
 *     (session.c): "local a, b <const> = 1" -> "a, b = 1",
 *     "local x" -> "x = nil", "local function f" -> "function f".  A
 *     statement with a <close> variable keeps Lua's rules (it is closed
 *     when the line ends).
 * Scripts never pass through here.  The lexer is forgiving: it never
 * fails on bad input (the Lua compiler reports errors; this only guides).
 */
#include <stdlib.h>
#include <string.h>

#include "repl.h"

typedef enum { TK_NAME, TK_KEYWORD, TK_NUMBER, TK_STRING, TK_SYMBOL, TK_EOF } tk_kind;

typedef struct {
  tk_kind kind;
  size_t at, len;
} token;

typedef struct {
  const char *s;
  size_t n, pos;
  bool open_long;  /* ended inside a long string or long comment */
  bool open_short; /* a short string ran into a newline or the end */
} lexer;

static const char *const keywords[] = {"and",   "break", "do",       "else",  "elseif", "end",
                                       "false", "for",   "function", "goto",  "if",     "in",
                                       "local", "nil",   "not",      "or",    "repeat", "return",
                                       "then",  "true",  "until",    "while", NULL};

static bool is_alpha(char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_keyword(const char *s, size_t len) {
  for (int i = 0; keywords[i]; i++)
    if (strlen(keywords[i]) == len && memcmp(keywords[i], s, len) == 0) return true;
  return false;
}

/* At "[" of "[==[": the level (number of '='), or -1 if not a long bracket. */
static int long_open_level(const lexer *x, size_t at) {
  size_t i = at + 1;
  while (i < x->n && x->s[i] == '=') i++;
  return i < x->n && x->s[i] == '[' ? (int)(i - at - 1) : -1;
}

/* Skip a long bracket of `level` opening at x->pos; marks open_long at the end. */
static void skip_long(lexer *x, int level) {
  size_t i = x->pos + (size_t)level + 2;
  for (; i < x->n; i++) {
    if (x->s[i] != ']') continue;
    size_t j = i + 1;
    while (j < x->n && x->s[j] == '=') j++;
    if (j < x->n && x->s[j] == ']' && (int)(j - i - 1) == level) {
      x->pos = j + 1;
      return;
    }
  }
  x->pos = x->n;
  x->open_long = true;
}

static void skip_short_string(lexer *x) {
  char quote = x->s[x->pos++];
  while (x->pos < x->n) {
    char c = x->s[x->pos++];
    if (c == '\\' && x->pos < x->n)
      x->pos++;
    else if (c == quote)
      return;
    else if (c == '\n')
      break;
  }
  x->open_short = true;
}

/* Skip spaces and comments. */
static void skip_space(lexer *x) {
  while (x->pos < x->n) {
    char c = x->s[x->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      x->pos++;
    } else if (c == '-' && x->pos + 1 < x->n && x->s[x->pos + 1] == '-') {
      x->pos += 2;
      int level = x->pos < x->n && x->s[x->pos] == '[' ? long_open_level(x, x->pos) : -1;
      if (level >= 0) {
        skip_long(x, level);
      } else {
        while (x->pos < x->n && x->s[x->pos] != '\n') x->pos++;
      }
    } else {
      return;
    }
  }
}

static const char *const symbols[] = {
    "...", "..", "==", "~=", "<=", ">=", "<<", ">>", "//", "::", NULL};

static size_t symbol_len(const lexer *x) {
  for (int i = 0; symbols[i]; i++) {
    size_t k = strlen(symbols[i]);
    if (x->pos + k <= x->n && memcmp(x->s + x->pos, symbols[i], k) == 0) return k;
  }
  return 1;
}

static token next_token(lexer *x) {
  skip_space(x);
  token t = {TK_EOF, x->pos, 0};
  if (x->pos >= x->n) return t;
  const char *s = x->s;
  char c = s[x->pos];
  if (is_alpha(c)) {
    while (x->pos < x->n && (is_alpha(s[x->pos]) || is_digit(s[x->pos]))) x->pos++;
    t.kind = is_keyword(s + t.at, x->pos - t.at) ? TK_KEYWORD : TK_NAME;
  } else if (is_digit(c) || (c == '.' && x->pos + 1 < x->n && is_digit(s[x->pos + 1]))) {
    while (x->pos < x->n &&
           (is_alpha(s[x->pos]) || is_digit(s[x->pos]) || s[x->pos] == '.' ||
            ((s[x->pos] == '+' || s[x->pos] == '-') && strchr("eEpP", s[x->pos - 1]))))
      x->pos++;
    t.kind = TK_NUMBER;
  } else if (c == '"' || c == '\'') {
    skip_short_string(x);
    t.kind = TK_STRING;
  } else if (c == '[' && long_open_level(x, x->pos) >= 0) {
    skip_long(x, long_open_level(x, x->pos));
    t.kind = TK_STRING;
  } else {
    x->pos += symbol_len(x);
    t.kind = TK_SYMBOL;
  }
  t.len = x->pos - t.at;
  return t;
}

/* ---- the scan ---------------------------------------------------------------------- */

static bool tok_is(const lexer *x, token t, const char *text) {
  return t.len == strlen(text) && memcmp(x->s + t.at, text, t.len) == 0;
}

/* Block depth change of a keyword: function/do/if/repeat open, end/until
 * close (while and for open with their `do`). */
static int block_delta(const lexer *x, token t) {
  if (t.kind != TK_KEYWORD) return 0;
  if (tok_is(x, t, "function") || tok_is(x, t, "do") || tok_is(x, t, "if") ||
      tok_is(x, t, "repeat"))
    return 1;
  return tok_is(x, t, "end") || tok_is(x, t, "until") ? -1 : 0;
}

static int bracket_delta(const lexer *x, token t) {
  if (t.kind != TK_SYMBOL || t.len != 1) return 0;
  char c = x->s[t.at];
  return (c == '(' || c == '[' || c == '{') ? 1 : (c == ')' || c == ']' || c == '}') ? -1 : 0;
}

/* Can more text follow `t`, the last token, and make a statement of it? */
static bool wants_more(const lexer *x, token t) {
  if (t.kind == TK_SYMBOL)
    return !(tok_is(x, t, ")") || tok_is(x, t, "]") || tok_is(x, t, "}") || tok_is(x, t, "...") ||
             tok_is(x, t, ";") || tok_is(x, t, "::"));
  if (t.kind == TK_KEYWORD)
    return !(tok_is(x, t, "end") || tok_is(x, t, "true") || tok_is(x, t, "false") ||
             tok_is(x, t, "nil") || tok_is(x, t, "break") || tok_is(x, t, "return"));
  return false;
}

static int add_edit(cnn_chunk *c, size_t at, size_t del, const char *ins) {
  if (c->nedits == c->capedits) {
    int cap = c->capedits ? 2 * c->capedits : 8;
    cnn_edit *e = realloc(c->edits, sizeof *e * (size_t)cap);
    if (e == NULL) return -1;
    c->edits = e;
    c->capedits = cap;
  }
  c->edits[c->nedits++] = (cnn_edit){at, del, ins};
  return 0;
}

/* A top-level `local` at token t: record its names and the edits that make
 * it an assignment.  Leaves the lexer after the name list. */
static int rewrite_local(lexer *x, token t, cnn_chunk *c) {
  lexer look = *x;
  token u = next_token(&look);
  if (tok_is(&look, u, "function")) {
    token name = next_token(&look);
    if (name.kind != TK_NAME)
      return 0; /* the lexer stays before `function`: the scan counts its block */
    if (cnn_strlist_add(&c->locals, x->s + name.at, name.len) < 0) return -1;
    return add_edit(c, t.at, t.len, "");
  }
  cnn_strlist names = {0};
  int first_edit = c->nedits, rc = 0;
  bool closes = false;
  size_t end = u.at + u.len;
  while (u.kind == TK_NAME && rc == 0) {
    rc = cnn_strlist_add(&names, look.s + u.at, u.len);
    end = u.at + u.len;
    *x = look;
    u = next_token(&look);
    if (tok_is(&look, u, "<")) { /* an attribute: <const> is dropped, <close> stays local */
      token attr = next_token(&look), gt = next_token(&look);
      closes = closes || tok_is(&look, attr, "close");
      end = gt.at + gt.len;
      rc = rc ? rc : add_edit(c, u.at, end - u.at, "");
      *x = look;
      u = next_token(&look);
    }
    if (!tok_is(&look, u, ",")) break;
    u = next_token(&look);
  }
  if (closes) {
    c->nedits = first_edit;
  } else if (rc == 0 && names.n > 0) {
    rc = add_edit(c, t.at, t.len, "");
    if (rc == 0 && !tok_is(&look, u, "=")) rc = add_edit(c, end, 0, " = nil");
    for (int i = 0; i < names.n && rc == 0; i++) {
      rc = cnn_strlist_add(&c->locals, names.v[i], strlen(names.v[i]));
      rc = rc ? rc : cnn_strlist_add(&c->names, names.v[i], strlen(names.v[i]));
    }
  }
  cnn_strlist_clear(&names);
  return rc;
}

static int cmp_edit(const void *a, const void *b) {
  const cnn_edit *x = a, *y = b;
  return (x->at > y->at) - (x->at < y->at);
}

int cnn_chunk_scan(const char *code, size_t len, cnn_chunk *c) {
  memset(c, 0, sizeof *c);
  c->split = -1;
  lexer x = {code, len, 0, false, false};
  int depth = 0, brackets = 0, rc = 0;
  token prev = {TK_EOF, 0, 0}, t;
  long semicolon = -1;
  while (rc == 0 && (t = next_token(&x)).kind != TK_EOF) {
    if (semicolon >= 0) c->split = semicolon, semicolon = -1;
    if (t.kind == TK_NAME &&
        !(prev.kind == TK_SYMBOL && (tok_is(&x, prev, ".") || tok_is(&x, prev, ":"))))
      rc = cnn_strlist_add(&c->names, code + t.at, t.len);
    if (depth == 0 && brackets == 0 && tok_is(&x, t, ";")) semicolon = (long)t.at;
    if (depth == 0 && t.kind == TK_KEYWORD && tok_is(&x, t, "local"))
      rc = rc ? rc : rewrite_local(&x, t, c);
    depth += block_delta(&x, t);
    brackets += bracket_delta(&x, t);
    prev = t;
  }
  cnn_strlist_sort_unique(&c->names);
  if (c->nedits > 1) qsort(c->edits, (size_t)c->nedits, sizeof *c->edits, cmp_edit);
  c->can_continue =
      x.open_long || (!x.open_short && (depth > 0 || brackets > 0 || wants_more(&x, prev)));
  return rc;
}

void cnn_chunk_free(cnn_chunk *c) {
  cnn_strlist_clear(&c->names);
  cnn_strlist_clear(&c->locals);
  free(c->edits);
  memset(c, 0, sizeof *c);
  c->split = -1;
}

/* code with the edits applied, and `extra` (an insertion, may be NULL)
 * among them; malloc'd, NUL-terminated. */
char *cnn_chunk_rewrite(const char *code, size_t len, const cnn_chunk *c, const cnn_edit *extra,
                        size_t *outlen) {
  size_t cap = len + 1 + (extra ? strlen(extra->ins) : 0);
  for (int i = 0; i < c->nedits; i++) cap += strlen(c->edits[i].ins);
  char *out = malloc(cap);
  if (out == NULL) return NULL;
  size_t from = 0, n = 0;
  bool extra_done = extra == NULL;
  for (int i = 0; i <= c->nedits; i++) {
    const cnn_edit *e = i < c->nedits ? &c->edits[i] : NULL;
    if (!extra_done && (e == NULL || extra->at <= e->at)) e = extra, extra_done = true, i--;
    if (e == NULL) break;
    memcpy(out + n, code + from, e->at - from);
    n += e->at - from;
    memcpy(out + n, e->ins, strlen(e->ins));
    n += strlen(e->ins);
    from = e->at + e->del;
  }
  memcpy(out + n, code + from, len - from);
  n += len - from;
  out[n] = '\0';
  *outlen = n;
  return out;
}

/* ---- keyword arguments: nn.Conv2d(1, 32, 3, padding=1) ------------------------------ */

/* PyTorch's keyword arguments written in Lua: the text with the first call
 * that has "name = value" among its arguments rewritten to pass them in a
 * table, "nn.Conv2d(1, 32, 3, {padding=1})"; NULL when there is none (or
 * out of memory).  malloc'd. */
char *cnn_chunk_keyword_call(const char *code, size_t len) {
  lexer x = {code, len, 0, false, false};
  enum { MAX_NEST = 64 };
  size_t open_at[MAX_NEST], kw_at[MAX_NEST];
  int depth = 0;
  token prev = {TK_EOF, 0, 0}, t;
  while ((t = next_token(&x)).kind != TK_EOF) {
    int d = bracket_delta(&x, t);
    if (d > 0 && depth < MAX_NEST) {
      open_at[depth] = t.at, kw_at[depth] = (size_t)-1;
      depth++;
    } else if (d < 0 && depth > 0) {
      depth--;
      if (code[open_at[depth]] == '(' && kw_at[depth] != (size_t)-1) {
        cnn_edit e[2] = {{kw_at[depth], 0, "{"}, {t.at, 0, "}"}};
        cnn_chunk c = {.edits = e, .nedits = 2};
        size_t n;
        return cnn_chunk_rewrite(code, len, &c, NULL, &n);
      }
    } else if (t.kind == TK_NAME && depth > 0 && code[open_at[depth - 1]] == '(' &&
               (tok_is(&x, prev, "(") || tok_is(&x, prev, ","))) {
      lexer look = x;
      token eq = next_token(&look);
      if (tok_is(&look, eq, "=") && kw_at[depth - 1] == (size_t)-1) kw_at[depth - 1] = t.at;
    }
    prev = t;
  }
  return NULL;
}
