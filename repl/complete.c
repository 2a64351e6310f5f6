/*
 * complete.c -- Tab completion for cnnsh, independent of readline (prompt.c
 * glues it in), so tests can call it on a plain Lua state.
 *
 * Contexts, decided from the text before the cursor:
 *   ":he"             a command name
 *   ":load sc"        a file path
 *   "f('data/tr"      a file path (inside an open string literal)
 *   "x:su", "a.b.c"   fields and methods; a bare word: globals and keywords
 *
 * Design (as Torch7's trepl): the expression a.b.c is resolved with raw
 * access only -- rawget on tables, then the metatable's `__methods` table,
 * the names listed in its `__fields` (computed fields such as x.shape),
 * and its `__index` *tables* (up to MAX_CHAIN of them); a function
 * __index is never called, so Tab never runs user code.  The one exception
 * is a lazily-required stdlib global (nn, optim, ...), which is required.
 * Candidates are whole replacements of the word: "string.format(" with "("
 * after functions and classes (nn.Conv2d(), "." after other tables.  After
 * "x." come fields: x's own keys and __fields, not the functions of its
 * metatables (its methods); after "x:" come methods (functions only).
 * Session variables (top-level locals typed earlier) resolve first.
 * Names starting with "_" are offered only when the prefix starts with "_".
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>

#include "repl.h"

#define MAX_CHAIN 8

static const char *const lazy_globals[] = {"nn",  "optim", "data",   "train",
                                           "viz", "help",  "models", NULL};
static const char *const keywords[] = {"and",   "break", "do",       "else",  "elseif", "end",
                                       "false", "for",   "function", "goto",  "if",     "in",
                                       "local", "nil",   "not",      "or",    "repeat", "return",
                                       "then",  "true",  "until",    "while", NULL};

/* ---- string lists -------------------------------------------------------------- */

int cnn_strlist_add(cnn_strlist *l, const char *s, size_t len) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    char **v = realloc(l->v, sizeof *v * (size_t)cap);
    if (v == NULL) return -1;
    l->v = v;
    l->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (copy == NULL) return -1;
  memcpy(copy, s, len);
  copy[len] = '\0';
  l->v[l->n++] = copy;
  return 0;
}

void cnn_strlist_clear(cnn_strlist *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void cnn_strlist_sort_unique(cnn_strlist *l) {
  if (l->n < 2) return;
  qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_str);
  int j = 0;
  for (int i = 1; i < l->n; i++) {
    if (strcmp(l->v[i], l->v[j]) == 0)
      free(l->v[i]);
    else
      l->v[++j] = l->v[i];
  }
  l->n = j + 1;
}

/* ---- context ---------------------------------------------------------------------- */

static bool is_word_char(char c) {
  return c == '_' || c == '.' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

/* Position just after the quote of a string still open at `point`, -1 if
 * none; -2 if the point is inside a comment. */
static int open_string(const char *line, int point) {
  char quote = 0;
  int at = -1;
  for (int i = 0; i < point; i++) {
    char c = line[i];
    if (quote) {
      if (c == '\\' && i + 1 < point)
        i++;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
      at = i + 1;
    } else if (c == '-' && i + 1 < point && line[i + 1] == '-') {
      return -2;
    }
  }
  return quote ? at : -1;
}

cnn_complete_kind cnn_complete_context(const char *line, int point, int *start) {
  int lead = (int)strspn(line, " \t");
  *start = point;
  if (lead < point && line[lead] == ':') {
    const char *sp = memchr(line + lead, ' ', (size_t)(point - lead));
    if (sp == NULL) {
      *start = lead;
      return CNN_COMPLETE_COMMAND;
    }
    if (strncmp(line + lead, ":load ", 6) == 0) {
      int s = point;
      while (s > lead + 6 && line[s - 1] != ' ') s--;
      *start = s;
      return CNN_COMPLETE_PATH;
    }
    if (strncmp(line + lead, ":time ", 6) != 0) return CNN_COMPLETE_NONE;
  }
  int q = open_string(line, point);
  if (q == -2) return CNN_COMPLETE_NONE;
  if (q >= 0) {
    *start = q;
    return CNN_COMPLETE_PATH;
  }
  int s = point;
  while (s > 0 && is_word_char(line[s - 1])) s--;
  *start = s;
  if (s < point && ((line[s] >= '0' && line[s] <= '9') || line[s] == '.'))
    return CNN_COMPLETE_NONE; /* a number, or a field of something unnamed */
  return CNN_COMPLETE_EXPR;
}

/* ---- resolving a.b.c with raw access --------------------------------------------- */

/* Push _G[name] (raw); a lazy stdlib global is found in package.loaded or
 * required.  Returns false (nothing pushed) when absent. */
static bool push_global(lua_State *L, const char *name, size_t len) {
  if (cnn_session_push(L, name, len)) /* a top-level local typed earlier */
    return true;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushlstring(L, name, len);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_remove(L, -2);
    return true;
  }
  lua_pop(L, 1);
  const char *key = lua_pushlstring(L, name, len);
  bool lazy = false;
  for (int i = 0; lazy_globals[i]; i++) lazy = lazy || strcmp(key, lazy_globals[i]) == 0;
  lua_pop(L, 1);
  if (lazy) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushlstring(L, name, len);
    if (lua_rawget(L, -2) != LUA_TNIL) {
      lua_remove(L, -2), lua_remove(L, -2);
      return true;
    }
    lua_pop(L, 2);
    lua_pushliteral(L, "require");
    if (lua_rawget(L, -2) == LUA_TFUNCTION) {
      lua_pushlstring(L, name, len);
      if (lua_pcall(L, 1, 1, 0) == LUA_OK && !lua_isnil(L, -1)) {
        lua_remove(L, -2);
        return true;
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return false;
}

/* Replace the value on top with value[key], raw, through __methods and
 * __index tables.  Returns false (value popped) when not found. */
static bool push_field(lua_State *L, const char *key, size_t len) {
  for (int level = 0; level < MAX_CHAIN; level++) {
    if (lua_istable(L, -1)) {
      lua_pushlstring(L, key, len);
      if (lua_rawget(L, -2) != LUA_TNIL) {
        lua_remove(L, -2);
        return true;
      }
      lua_pop(L, 1);
    }
    if (!lua_getmetatable(L, -1)) break;
    lua_remove(L, -2); /* continue from the metatable */
    lua_pushliteral(L, "__methods");
    if (lua_rawget(L, -2) == LUA_TTABLE) {
      lua_pushlstring(L, key, len);
      if (lua_rawget(L, -2) != LUA_TNIL) {
        lua_remove(L, -2), lua_remove(L, -2);
        return true;
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_pushliteral(L, "__index");
    if (lua_rawget(L, -2) != LUA_TTABLE) {
      lua_pop(L, 1);
      break;
    }
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return false;
}

/* Push the value named by expr ("a.b.c"); false (nothing pushed) if any
 * part is missing or expr is not a plain dotted name. */
static bool resolve(lua_State *L, const char *expr, size_t len) {
  const char *end = expr + len, *p = expr;
  const char *dot = memchr(p, '.', len);
  size_t n = dot ? (size_t)(dot - p) : len;
  if (n == 0 || memchr(expr, ':', len) || !push_global(L, p, n)) return false;
  while (dot) {
    p = dot + 1;
    dot = memchr(p, '.', (size_t)(end - p));
    n = dot ? (size_t)(dot - p) : (size_t)(end - p);
    if (n == 0 || !push_field(L, p, n)) return false;
  }
  return true;
}

/* ---- collecting candidates --------------------------------------------------------- */

typedef struct {
  cnn_strlist *out;
  const char *base; /* "string." / "x:" / "" */
  size_t baselen;
  const char *prefix;
  size_t prefixlen;
  bool methods_only; /* after "x:": functions, from anywhere */
  bool fields_only;  /* after "x.": no functions from the metatables (methods) */
} collector;

static bool is_identifier(const char *s) {
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

static void offer(collector *c, const char *name, const char *suffix) {
  size_t n = strlen(name), s = strlen(suffix);
  if (strncmp(name, c->prefix, c->prefixlen) != 0 || !is_identifier(name)) return;
  if (name[0] == '_' && c->prefix[0] != '_') return;
  char *buf = malloc(c->baselen + n + s + 1);
  if (buf == NULL) return;
  memcpy(buf, c->base, c->baselen);
  memcpy(buf + c->baselen, name, n);
  memcpy(buf + c->baselen + n, suffix, s + 1);
  cnn_strlist_add(c->out, buf, c->baselen + n + s);
  free(buf);
}

/* A class: a table with a raw __index that its metatable makes callable
 * (nn.Conv2d, optim.Adam).  Instances are callable too but have no
 * __index of their own. */
static bool is_class(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || !lua_getmetatable(L, idx)) return false;
  lua_pushliteral(L, "__call");
  bool callable = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 2);
  lua_pushliteral(L, "__index");
  bool has_index = lua_rawget(L, idx < 0 ? idx - 1 : idx) != LUA_TNIL;
  lua_pop(L, 1);
  return callable && has_index;
}

/* Offer the string keys of the table on top (raw), by the kind of value:
 * "(" after functions and classes, "." after other tables.  `own`: the
 * table is the value itself, not one of its metatables' method tables. */
static void offer_keys(lua_State *L, collector *c, bool own) {
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    int t = lua_type(L, -1);
    bool wanted =
        c->methods_only ? t == LUA_TFUNCTION : !(c->fields_only && !own && t == LUA_TFUNCTION);
    if (lua_type(L, -2) == LUA_TSTRING && wanted) {
      bool call = t == LUA_TFUNCTION || is_class(L, -1);
      offer(c, lua_tostring(L, -2), call ? "(" : t == LUA_TTABLE ? "." : "");
    }
    lua_pop(L, 1);
  }
}

/* Offer the names in the `__fields` list of the metatable on top: fields a
 * C __index computes (x.shape, x.dtype), which no table holds. */
static void offer_field_names(lua_State *L, collector *c) {
  lua_pushliteral(L, "__fields");
  if (lua_rawget(L, -2) == LUA_TTABLE && !c->methods_only) {
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TSTRING; i++) {
      offer(c, lua_tostring(L, -1), "");
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* Offer the fields of the value on top and of its metatables' __methods
 * and __index tables; pops the value. */
static void offer_fields(lua_State *L, collector *c) {
  for (int level = 0; level < MAX_CHAIN; level++) {
    if (lua_istable(L, -1)) offer_keys(L, c, level == 0);
    if (!lua_getmetatable(L, -1)) break;
    lua_remove(L, -2);
    lua_pushliteral(L, "__methods");
    if (lua_rawget(L, -2) == LUA_TTABLE) offer_keys(L, c, false);
    lua_pop(L, 1);
    offer_field_names(L, c);
    lua_pushliteral(L, "__index");
    if (lua_rawget(L, -2) != LUA_TTABLE) {
      lua_pop(L, 1);
      break;
    }
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

static void offer_globals(lua_State *L, collector *c) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  offer_fields(L, c);
  for (int i = 0; lazy_globals[i]; i++)
    offer(c, lazy_globals[i], strcmp(lazy_globals[i], "help") == 0 ? "(" : ".");
  for (int i = 0; keywords[i]; i++) {
    if (strncmp(keywords[i], c->prefix, c->prefixlen) == 0)
      cnn_strlist_add(c->out, keywords[i], strlen(keywords[i]));
  }
}

int cnn_complete_expr(lua_State *L, const char *word, cnn_strlist *out) {
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 2 * MAX_CHAIN + 10)) return 0;
  int before = out->n;
  const char *dot = strrchr(word, '.'), *colon = strrchr(word, ':');
  const char *sep = dot > colon ? dot : colon;
  collector c = {.out = out, .base = word, .baselen = 0, .prefix = word, .prefixlen = strlen(word)};
  if (sep == NULL) {
    offer_globals(L, &c);
  } else if (resolve(L, word, (size_t)(sep - word))) {
    c.baselen = (size_t)(sep - word) + 1;
    c.prefix = sep + 1;
    c.prefixlen = strlen(sep + 1);
    c.methods_only = *sep == ':';
    c.fields_only = *sep == '.';
    offer_fields(L, &c);
  }
  lua_settop(L, top);
  return out->n - before;
}

/* ---- commands and paths ------------------------------------------------------------ */

int cnn_complete_command(const char *word, cnn_strlist *out) {
  int before = out->n;
  for (int i = 0; cnn_repl_command_names[i]; i++) {
    const char *name = cnn_repl_command_names[i];
    if (strncmp(name, word, strlen(word)) == 0) cnn_strlist_add(out, name, strlen(name));
  }
  return out->n - before;
}

int cnn_complete_path(const char *word, cnn_strlist *out) {
  const char *slash = strrchr(word, '/');
  size_t dirlen = slash ? (size_t)(slash - word) + 1 : 0;
  const char *prefix = word + dirlen;
  char dir[4096];
  const char *home = getenv("HOME");
  if (dirlen == 0)
    snprintf(dir, sizeof dir, ".");
  else if (word[0] == '~' && word[1] == '/' && home)
    snprintf(dir, sizeof dir, "%s/%.*s", home, (int)(dirlen - 2), word + 2);
  else
    snprintf(dir, sizeof dir, "%.*s", (int)dirlen, word);
  DIR *d = opendir(dir[0] ? dir : "/");
  if (d == NULL) return 0;
  int before = out->n;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (strncmp(name, prefix, strlen(prefix)) != 0 || (name[0] == '.' && prefix[0] != '.'))
      continue;
    char full[8192], cand[8192];
    struct stat st;
    snprintf(full, sizeof full, "%s/%s", dir, name);
    bool isdir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
    int n = snprintf(cand, sizeof cand, "%.*s%s%s", (int)dirlen, word, name, isdir ? "/" : "");
    if (n > 0 && (size_t)n < sizeof cand) cnn_strlist_add(out, cand, (size_t)n);
  }
  closedir(d);
  return out->n - before;
}

int cnn_complete(lua_State *L, const char *line, int point, int *start, cnn_strlist *out) {
  cnn_complete_kind kind = cnn_complete_context(line, point, start);
  size_t len = (size_t)(point - *start);
  char *word = malloc(len + 1);
  if (word == NULL) return 0;
  memcpy(word, line + *start, len);
  word[len] = '\0';
  switch (kind) {
  case CNN_COMPLETE_COMMAND: cnn_complete_command(word, out); break;
  case CNN_COMPLETE_PATH: cnn_complete_path(word, out); break;
  case CNN_COMPLETE_EXPR: cnn_complete_expr(L, word, out); break;
  case CNN_COMPLETE_NONE: break;
  }
  free(word);
  cnn_strlist_sort_unique(out);
  return out->n;
}
