/*
 * print.c -- the pretty printer of results at the cnnsh prompt.
 *
 * A value prints by kind:
 *   strings     quoted, escapes visible ("a\n"); nested ones cut at 120 chars
 *   numbers     as Lua writes them (1, 1.5, 1e+100)
 *   tables      readably: the array part first, then the other keys sorted
 *               (numbers, strings, the rest); one line when it fits in
 *               `width` columns, else one entry per line, indented.  Tables
 *               on the current path print as <cycle>; deeper than max_depth
 *               as {...}; more than max_items entries end "... (n more)".
 *   tostring    tables and userdata with __tostring (modules, tensors) print
 *               through it: a module as its tree.  A tensor *inside* a table
 *               shows only its summary line (the last line of tostring).
 *   functions   "function: 0x..." and, when cnn.doc knows it, its signature.
 * Colours (ANSI) only when asked; widths are measured without them.
 *
 * Design: rendering appends to a growable buffer held by a userdata with
 * __gc, so a __tostring that raises leaks nothing.  Traversal uses raw
 * access (lua_next, lua_rawget); the only user code that can run is
 * __tostring.  Invariant: the Lua stack is balanced by every render_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "repl.h"

#define NESTED_STRING_MAX 120
#define SBUF_META         "cnn.repl.sbuf"

enum { C_NONE = 0, C_STR = 32, C_NUM = 36, C_LIT = 35, C_FUN = 33, C_DIM = 90, C_ERR = 31 };

typedef struct {
  char *p;
  size_t n, cap;
} sbuf;

typedef struct {
  lua_State *L;
  const cnn_print_opts *o;
  int seen;      /* absolute index: tables on the current path */
  sbuf *scratch; /* for measuring the one-line form */
  bool color;    /* this pass emits colours */
  bool oneline;  /* this pass never breaks lines */
  size_t limit;  /* oneline pass: give up once longer than this (0: none) */
} ctx;

static void render(ctx *c, sbuf *b, int idx, int depth, int indent, bool top);

/* ---- the buffer ------------------------------------------------------------- */

static int sbuf_gc(lua_State *L) {
  sbuf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
  return 0;
}

static sbuf *sbuf_push(lua_State *L) {
  sbuf *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  if (luaL_newmetatable(L, SBUF_META)) {
    lua_pushcfunction(L, sbuf_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

static void put(ctx *c, sbuf *b, const char *s, size_t len) {
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + len + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) luaL_error(c->L, "print: not enough memory");
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static void puts_(ctx *c, sbuf *b, const char *s) { put(c, b, s, strlen(s)); }

static void color_on(ctx *c, sbuf *b, int code) {
  if (c->color && code != C_NONE) {
    char esc[16];
    snprintf(esc, sizeof esc, "\033[%dm", code);
    puts_(c, b, esc);
  }
}

static void color_off(ctx *c, sbuf *b, int code) {
  if (c->color && code != C_NONE) puts_(c, b, "\033[0m");
}

static void colored(ctx *c, sbuf *b, int code, const char *s, size_t len) {
  color_on(c, b, code);
  put(c, b, s, len);
  color_off(c, b, code);
}

static void spaces(ctx *c, sbuf *b, int n) {
  static const char sp[] = "                                ";
  for (; n > 0; n -= 32) put(c, b, sp, n < 32 ? (size_t)n : 32);
}

/* Text that may span lines, continuation lines indented by `indent`. */
static void put_indented(ctx *c, sbuf *b, const char *s, size_t len, int indent) {
  const char *end = s + len;
  while (s < end) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t n = nl ? (size_t)(nl - s + 1) : (size_t)(end - s);
    put(c, b, s, n);
    s += n;
    if (nl && s < end) spaces(c, b, indent);
  }
}

/* ---- scalars ---------------------------------------------------------------- */

static void render_string(ctx *c, sbuf *b, int idx, bool top) {
  size_t len;
  const char *s = lua_tolstring(c->L, idx, &len);
  size_t shown = (!top && len > NESTED_STRING_MAX) ? NESTED_STRING_MAX : len;
  color_on(c, b, C_STR);
  put(c, b, "\"", 1);
  for (size_t i = 0; i < shown; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[8];
    switch (ch) {
    case '"': put(c, b, "\\\"", 2); break;
    case '\\': put(c, b, "\\\\", 2); break;
    case '\n': put(c, b, "\\n", 2); break;
    case '\t': put(c, b, "\\t", 2); break;
    case '\r': put(c, b, "\\r", 2); break;
    default:
      if (ch < 32 || ch == 127) {
        snprintf(esc, sizeof esc, "\\%d", ch);
        puts_(c, b, esc);
      } else {
        put(c, b, (const char *)&s[i], 1);
      }
    }
  }
  put(c, b, "\"", 1);
  color_off(c, b, C_STR);
  if (shown < len) {
    char more[48];
    snprintf(more, sizeof more, "... (%zu bytes)", len);
    colored(c, b, C_DIM, more, strlen(more));
  }
}

static void render_number(ctx *c, sbuf *b, int idx) {
  lua_pushvalue(c->L, idx);
  size_t len;
  const char *s = lua_tolstring(c->L, -1, &len); /* converts the copy */
  colored(c, b, C_NUM, s, len);
  lua_pop(c->L, 1);
}

/* The first line of cnn.doc[f], found with raw access; pushes nothing. */
static void render_doc(ctx *c, sbuf *b, int idx) {
  lua_State *L = c->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushliteral(L, "cnn");
  lua_rawget(L, -2);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "doc");
    lua_rawget(L, -2);
    if (lua_istable(L, -1)) {
      lua_pushvalue(L, idx);
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TSTRING) {
        const char *d = lua_tostring(L, -1);
        size_t n = strcspn(d, "\n");
        colored(c, b, C_DIM, "  -- ", 5);
        colored(c, b, C_DIM, d, n);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

static bool is_tensor(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return false;
  lua_pushliteral(L, "__name");
  lua_rawget(L, -2);
  bool yes = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "cnn.Tensor") == 0;
  lua_pop(L, 2);
  return yes;
}

/* tostring() of the value (its __tostring or __name); nested tensors keep
 * only their last, summary line. */
static void render_tostring(ctx *c, sbuf *b, int idx, int indent, bool top) {
  size_t len;
  const char *s = luaL_tolstring(c->L, idx, &len);
  int code = lua_type(c->L, idx) == LUA_TFUNCTION ? C_FUN : C_NONE;
  if (!top && is_tensor(c->L, idx)) {
    while (len > 0 && s[len - 1] == '\n') len--;
    const char *last = s + len;
    while (last > s && last[-1] != '\n') last--;
    len -= (size_t)(last - s);
    s = last;
  }
  if (c->oneline && c->limit && memchr(s, '\n', len))
    c->limit = 1; /* cannot be one line: make the measure fail */
  color_on(c, b, code);
  put_indented(c, b, s, len, indent);
  color_off(c, b, code);
  lua_pop(c->L, 1);
}

/* ---- tables ----------------------------------------------------------------- */

typedef struct {
  int rank; /* 0 numbers, 1 strings, 2 booleans, 3 other */
  double num;
  const char *str;
  int pos; /* index in the keys table */
} keyinfo;

static int cmp_keys(const void *pa, const void *pb) {
  const keyinfo *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank - b->rank;
  if (a->rank == 0) return (a->num > b->num) - (a->num < b->num);
  if (a->rank == 1) return strcmp(a->str, b->str);
  return a->pos - b->pos;
}

static int array_length(lua_State *L, int t) {
  int n = 0;
  while (lua_rawgeti(L, t, n + 1) != LUA_TNIL) {
    lua_pop(L, 1);
    n++;
  }
  lua_pop(L, 1);
  return n;
}

/* Push a sequence of the keys of table t that are not in 1..narr, sorted,
 * and return their count. */
static int push_sorted_keys(lua_State *L, int t, int narr) {
  lua_newtable(L);
  int keys = lua_gettop(L), nk = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= narr) continue;
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, ++nk);
  }
  keyinfo *ki = lua_newuserdatauv(L, sizeof *ki * (size_t)(nk ? nk : 1), 0);
  for (int i = 0; i < nk; i++) {
    int tp = lua_rawgeti(L, keys, i + 1);
    ki[i].pos = i + 1;
    ki[i].rank = tp == LUA_TNUMBER ? 0 : tp == LUA_TSTRING ? 1 : tp == LUA_TBOOLEAN ? 2 : 3;
    ki[i].num = tp == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
    ki[i].str = tp == LUA_TSTRING ? lua_tostring(L, -1) : NULL; /* anchored in keys */
    lua_pop(L, 1);
  }
  qsort(ki, (size_t)nk, sizeof *ki, cmp_keys);
  lua_newtable(L);
  for (int i = 0; i < nk; i++) {
    lua_rawgeti(L, keys, ki[i].pos);
    lua_rawseti(L, -2, i + 1);
  }
  lua_replace(L, keys);
  lua_pop(L, 1); /* ki */
  return nk;
}

static bool is_identifier(const char *s) {
  static const char *const kw[] = {"and",   "break", "do",       "else",  "elseif", "end",
                                   "false", "for",   "function", "goto",  "if",     "in",
                                   "local", "nil",   "not",      "or",    "repeat", "return",
                                   "then",  "true",  "until",    "while", NULL};
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9')))
      return false;
  for (int i = 0; kw[i]; i++)
    if (strcmp(s, kw[i]) == 0) return false;
  return true;
}

static void render_key(ctx *c, sbuf *b, int idx, int depth) {
  if (lua_type(c->L, idx) == LUA_TSTRING && is_identifier(lua_tostring(c->L, idx))) {
    puts_(c, b, lua_tostring(c->L, idx));
  } else {
    put(c, b, "[", 1);
    bool saved = c->oneline;
    c->oneline = true;
    render(c, b, idx, depth + 1, 0, false);
    c->oneline = saved;
    put(c, b, "]", 1);
  }
  put(c, b, " = ", 3);
}

static bool over(const ctx *c, const sbuf *b) { return c->limit && b->n > c->limit; }

/* The entries of table t, either ", "-separated or one per line. */
static void render_entries(ctx *c, sbuf *b, int t, int depth, int indent) {
  lua_State *L = c->L;
  luaL_checkstack(L, 8, "print: nesting too deep");
  int narr = array_length(L, t);
  int nk = push_sorted_keys(L, t, narr);
  int keys = lua_gettop(L), total = narr + nk;
  int shown = total < c->o->max_items ? total : c->o->max_items;
  for (int i = 0; i < shown && !over(c, b); i++) {
    if (c->oneline)
      puts_(c, b, i ? ", " : "");
    else
      put(c, b, "\n", 1), spaces(c, b, indent + 2);
    if (i < narr) {
      lua_rawgeti(L, t, i + 1);
    } else {
      lua_rawgeti(L, keys, i - narr + 1);
      render_key(c, b, lua_gettop(L), depth);
      lua_rawget(L, t);
    }
    render(c, b, lua_gettop(L), depth + 1, indent + 2, false);
    lua_pop(L, 1);
    if (!c->oneline) put(c, b, ",", 1);
  }
  if (shown < total) {
    char more[48];
    snprintf(more, sizeof more, "... (%d more)", total - shown);
    if (c->oneline)
      puts_(c, b, ", ");
    else
      put(c, b, "\n", 1), spaces(c, b, indent + 2);
    colored(c, b, C_DIM, more, strlen(more));
  }
  if (!c->oneline) put(c, b, "\n", 1), spaces(c, b, indent);
  lua_pop(L, 1); /* keys */
}

/* Does the table fit on one line in the columns left? */
static bool fits_one_line(ctx *c, int t, int depth, int indent) {
  ctx m = *c;
  m.color = false;
  m.oneline = true;
  m.limit = (size_t)(c->o->width > indent ? c->o->width - indent : 1);
  m.scratch->n = 0;
  put(&m, m.scratch, "{", 1);
  render_entries(&m, m.scratch, t, depth, indent);
  put(&m, m.scratch, "}", 1);
  return !over(&m, m.scratch) && m.limit != 1;
}

static void render_table(ctx *c, sbuf *b, int t, int depth, int indent) {
  lua_State *L = c->L;
  lua_pushnil(L);
  bool empty = lua_next(L, t) == 0;
  if (!empty) lua_pop(L, 2);
  if (empty) {
    puts_(c, b, "{}");
    return;
  }
  lua_pushvalue(L, t);
  if (lua_rawget(L, c->seen) != LUA_TNIL) {
    lua_pop(L, 1);
    colored(c, b, C_ERR, "<cycle>", 7);
    return;
  }
  lua_pop(L, 1);
  if (depth >= c->o->max_depth) {
    colored(c, b, C_DIM, "{...}", 5);
    return;
  }
  lua_pushvalue(L, t);
  lua_pushboolean(L, 1);
  lua_rawset(L, c->seen);
  bool saved = c->oneline;
  if (!c->oneline && fits_one_line(c, t, depth, indent)) c->oneline = true;
  put(c, b, "{", 1);
  render_entries(c, b, t, depth, indent);
  put(c, b, "}", 1);
  c->oneline = saved;
  lua_pushvalue(L, t);
  lua_pushnil(L);
  lua_rawset(L, c->seen);
}

static void render(ctx *c, sbuf *b, int idx, int depth, int indent, bool top) {
  lua_State *L = c->L;
  idx = lua_absindex(L, idx);
  if (over(c, b)) return;
  switch (lua_type(L, idx)) {
  case LUA_TNIL: colored(c, b, C_LIT, "nil", 3); break;
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx))
      colored(c, b, C_LIT, "true", 4);
    else
      colored(c, b, C_LIT, "false", 5);
    break;
  case LUA_TNUMBER: render_number(c, b, idx); break;
  case LUA_TSTRING: render_string(c, b, idx, top); break;
  case LUA_TTABLE:
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {
      lua_pop(L, 1);
      render_tostring(c, b, idx, indent, top);
    } else {
      render_table(c, b, idx, depth, indent);
    }
    break;
  case LUA_TFUNCTION:
    render_tostring(c, b, idx, indent, top);
    render_doc(c, b, idx);
    break;
  default: render_tostring(c, b, idx, indent, top); break;
  }
}

/* ---- entry points ----------------------------------------------------------- */

void cnn_print_opts_init(cnn_print_opts *o, bool color) {
  o->color = color;
  o->max_depth = 5;
  o->max_items = 64;
  o->width = 78;
}

const char *cnn_repl_format(lua_State *L, int idx, const cnn_print_opts *o) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 16, "print");
  int base = lua_gettop(L);
  ctx c = {.L = L, .o = o, .color = o->color};
  sbuf *b = sbuf_push(L);
  c.scratch = sbuf_push(L);
  lua_newtable(L);
  c.seen = lua_gettop(L);
  render(&c, b, idx, 0, 0, true);
  lua_pushlstring(L, b->p ? b->p : "", b->n);
  lua_replace(L, base + 1);
  lua_settop(L, base + 1);
  return lua_tostring(L, -1);
}

void cnn_repl_print_values(lua_State *L, int first, const cnn_print_opts *o) {
  int top = lua_gettop(L);
  bool multiline = false;
  for (int i = first; i <= top; i++) {
    const char *s = cnn_repl_format(L, i, o);
    multiline = multiline || strchr(s, '\n') != NULL;
  }
  for (int i = top + 1; i <= lua_gettop(L); i++) {
    if (i > top + 1) fputs(multiline ? "\n" : "\t", stdout);
    fputs(lua_tostring(L, i), stdout);
  }
  fputs("\n", stdout);
  fflush(stdout);
  lua_settop(L, top);
}
