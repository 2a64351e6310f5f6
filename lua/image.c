/*
 * image.c -- images from Lua: cnn.io.read_image, read_png, write_png
 * (C x H x W uint8 tensors) and cnn.io.list_dir (the folder scan of
 * data.ImageFolder).  Decoding is core/io/image.c.
 *
 *   img = cnn.io.read_image(path [, {mode = "unchanged"}])   -- uint8 C x H x W
 *   cnn.io.write_png(path, img)             -- uint8 C x H x W (C = 1, 3, 4) or H x W
 *   cnn.io.write_jpeg(path, img [, {quality = 90}])  -- C = 1 or 3
 *   cnn.io.mkdir(path)                      -- mkdir -p
 *   names, kinds = cnn.io.list_dir(path)    -- sorted; kinds[i] "file" | "dir" | "other"
 *
 * mode: "unchanged" (the file's channels: 1 gray, 2 gray+alpha, 3 RGB,
 * 4 RGBA), "gray", "rgb" or "rgba"; the conversions are listed in
 * core/io/image.c.  read_png is read_image restricted to PNG files.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bind.h"
#include "io/io.h"

/* mode name in the options table at opts -> mode (raises on unknown names) */
static cnn_image_mode check_mode(lua_State *L, const char *fn, int opts, const char *def) {
  static const char *const names[] = {"unchanged", "gray", "rgb", "rgba", NULL};
  if (opts && lua_istable(L, opts)) {
    lua_pushnil(L);
    while (lua_next(L, opts)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "mode") != 0)
        cnn_lua_fail(L, "%s: unknown option '%s' (options: mode)", fn, luaL_tolstring(L, -2, NULL));
      lua_pop(L, 1);
    }
  } else if (opts && !lua_isnoneornil(L, opts)) {
    cnn_lua_fail(L, "%s: options must be a table ({mode = ...})", fn);
  }
  const char *m = cnn_lua_opt_string(L, opts, "mode", def);
  for (int i = 0; names[i]; i++)
    if (strcmp(m, names[i]) == 0) return (cnn_image_mode)i;
  return cnn_lua_fail(L, "%s: unknown mode '%s' (modes: unchanged, gray, rgb, rgba)", fn, m);
}

static int push_image(lua_State *L, const char *fn, const char *path, cnn_image_mode mode) {
  cnn_image img;
  if (cnn_image_load(path, mode, &img) < 0) return cnn_lua_fail(L, "%s: %s", fn, cnn_error());
  cnn_tensor *t = cnn_image_to_tensor(&img);
  cnn_image_free(&img);
  return cnn_lua_push_result(L, t);
}

/* cnn.io.read_image(path [, {mode =}]) -> uint8 C x H x W */
static int f_read_image(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  return push_image(L, "read_image", path, check_mode(L, "read_image", 2, "unchanged"));
}

/* cnn.io.read_png(path [, {mode =}]) -> uint8 C x H x W (PNG files only) */
static int f_read_png(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  cnn_image_mode mode = check_mode(L, "read_png", 2, "unchanged");
  uint8_t head[8] = {0};
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(head, 1, sizeof head, f) : 0;
  if (f) fclose(f);
  if (f && cnn_image_sniff(head, n) != CNN_IMAGE_PNG)
    return cnn_lua_fail(L, "read_png: %s is not a PNG file (io.read_image reads JPEG too)", path);
  return push_image(L, "read_png", path, mode);
}

/* The uint8 C x H x W (or H x W) image at arg as contiguous H x W x C bytes
 * on the CPU (the tensors are left on the stack); *c = channels. */
static const uint8_t *hwc_pixels(lua_State *L, const char *fn, int arg, const char *allowed,
                                 int64_t *h, int64_t *w, int *c) {
  cnn_tensor *t = cnn_lua_check_tensor(L, arg);
  char s[CNN_SHAPE_STR];
  int64_t ch = t->ndim == 3 ? t->shape[0] : 1;
  if (t->dtype != CNN_UINT8 || (t->ndim != 2 && t->ndim != 3) || ch < 1 || ch > 4 ||
      !strchr(allowed, '0' + (int)ch))
    cnn_lua_fail(L, "%s: expects a uint8 C x H x W tensor with C = %s (or H x W), got %s %s", fn,
                 allowed[1] == '3' && allowed[2] == '4' ? "1, 3 or 4" : "1 or 3",
                 cnn_tensor_shape_str(t, s), cnn_dtype_name(t->dtype));
  cnn_tensor *hwc = t;
  if (t->ndim == 3) {
    hwc = cnn_permute(t, (int[]){1, 2, 0});
    cnn_lua_push_result(L, hwc);
  }
  cnn_tensor *cpu = cnn_to_device(hwc, CNN_DEVICE_CPU);
  cnn_lua_push_result(L, cpu);
  cnn_tensor *cc = cnn_contiguous(cpu);
  cnn_lua_push_result(L, cc);
  *h = t->shape[t->ndim - 2], *w = t->shape[t->ndim - 1], *c = (int)ch;
  return cnn_tensor_data(cc);
}

/* cnn.io.write_png(path, img): uint8 C x H x W (C = 1, 3 or 4) or H x W */
static int f_write_png(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int64_t h, w;
  int c;
  const uint8_t *px = hwc_pixels(L, "write_png", 2, "134", &h, &w, &c);
  if (cnn_png_write(path, h, w, c, px) != 0) return cnn_lua_fail(L, "write_png: %s", cnn_error());
  return 0;
}

/* cnn.io.write_jpeg(path, img [, {quality = 90}]): uint8 C x H x W (C = 1 or 3) or H x W */
static int f_write_jpeg(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "quality") != 0)
        return cnn_lua_fail(L, "write_jpeg: unknown option '%s' (options: quality)",
                            luaL_tolstring(L, -2, NULL));
      lua_pop(L, 1);
    }
  }
  double q = cnn_lua_opt_number(L, lua_istable(L, 3) ? 3 : 0, "quality", 90);
  if (!(q >= 1 && q <= 100) || q != (int)q)
    return cnn_lua_fail(L, "write_jpeg: quality must be an integer in [1, 100], got %g", q);
  int64_t h, w;
  int c;
  const uint8_t *px = hwc_pixels(L, "write_jpeg", 2, "13", &h, &w, &c);
  if (cnn_jpeg_write(path, h, w, c, px, (int)q) != 0)
    return cnn_lua_fail(L, "write_jpeg: %s", cnn_error());
  return 0;
}

/* cnn.io.mkdir(path): creates the folder and its parents (mkdir -p); fine if it exists */
static int f_mkdir(lua_State *L) {
  size_t n;
  const char *path = luaL_checklstring(L, 1, &n);
  char *p = lua_newuserdatauv(L, n + 1, 0);
  memcpy(p, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char saved = p[i];
    p[i] = 0;
    struct stat st;
    if (mkdir(p, 0777) != 0 && errno != EEXIST)
      return cnn_lua_fail(L, "mkdir: cannot create %s: %s", p, strerror(errno));
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
      return cnn_lua_fail(L, "mkdir: %s exists and is not a folder", p);
    p[i] = saved;
  }
  return 0;
}

/* ---- folders ----------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *kind_of(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  struct stat st;
  int rc = p ? (snprintf(p, n, "%s/%s", dir, name), stat(p, &st)) : -1;
  free(p);
  if (rc != 0) return "other";
  return S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : "other";
}

/* cnn.io.list_dir(path) -> names, kinds (sorted by byte order; no "." "..";
 * symbolic links followed) */
static int f_list_dir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *d = opendir(path);
  if (!d) return cnn_lua_fail(L, "list_dir: cannot open the folder %s: %s", path, strerror(errno));
  lua_newtable(L); /* names, in reading order */
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  closedir(d);
  const char **sorted = lua_newuserdatauv(L, sizeof *sorted * (size_t)(n + 1), 0);
  /* the strings stay alive in the names table, so the pointers stay valid */
  for (int i = 0; i < n; i++)
    lua_rawgeti(L, -2, i + 1), sorted[i] = lua_tostring(L, -1), lua_pop(L, 1);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_name);
  lua_createtable(L, n, 0);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, sorted[i]);
    lua_rawseti(L, -3, i + 1);
    lua_pushstring(L, kind_of(path, sorted[i]));
    lua_rawseti(L, -2, i + 1);
  }
  return 2;
}

const luaL_Reg cnn_lua_image_module[] = {{"read_image", f_read_image},
                                         {"read_png", f_read_png},
                                         {"write_png", f_write_png},
                                         {"list_dir", f_list_dir},
                                         {"write_jpeg", f_write_jpeg},
                                         {"mkdir", f_mkdir},
                                         {NULL, NULL}};
