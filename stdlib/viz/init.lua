-- viz/init.lua -- terminal pictures and PNG images of tensors (the "viz"
-- module), one renderer a file:
--
--   viz.show(t)          a 2-D tensor as a heatmap, with a scale and min/max
--   viz.grid(t)          N x C x H x W maps or filters as a labelled montage
--   viz.hist(t)          a histogram of the values
--   viz.plot(s1, s2...)  line chart (Braille dots) of Lua lists or 1-D tensors
--   viz.gradflow(net)    bar chart of the gradient norm of every parameter
--   viz.graph(t)         the autograd graph that produced t, as a tree / DOT
--   viz.save_png(t, p)   a 2-D map, a 3 x H x W RGB image or a montage -> PNG
-- Each drawing function prints; its twin `viz.<name>_str` returns the text.
-- Files: show.lua, grid.lua, hist.lua, plot.lua, gradflow.lua, graph.lua,
-- png.lua (save_png); common.lua holds what they share (options, modes,
-- colours, the renderers of a 2-D list and of RGB planes, resampling).
--
-- Design.  Pixels are fetched once into a flat Lua list (row-major) and
-- drawn in one of three modes:
--   "color"  two pixels per character cell: the half block "▀" with the
--            upper pixel as 24-bit foreground and the lower as background;
--   "grey"   one shade character " ░▒▓█" per pixel (colour off: NO_COLOR
--            set, or stdout not a terminal);
--   "ascii"  the ramp " .:-=+*#%@" per pixel (cnn.ascii, set by --ascii).
-- In the ramp modes a pixel is two characters wide so that it looks square.
-- A value v maps to u = (v - lo) / (hi - lo) in [0, 1] (0.5 when hi == lo)
-- and to ramp level floor(u * (n - 1) + 0.5): lo is always the first
-- character and hi the last; in colour u is quantised to 256 levels whose
-- escape sequences are built once per colour map (a table lookup per
-- pixel keeps a 64-map grid under 0.1 s).  NaN shows as "?" (red in colour).  lo and hi
-- are the minimum and maximum of the finite values unless opts.vmin/vmax.
-- Images wider than the terminal (COLUMNS, else the tty's width, else 80)
-- are shrunk by an integer factor, averaging blocks of pixels.
--
-- Invariant: every line a renderer returns has the same visible width, so
-- tiles can be joined side by side with plain string concatenation.
-- Every public function checks its options first (check_opts: integers
-- where counts are meant, finite numbers, known mode and cmap names), with
-- errors naming it at the user's line.
local cnn = _G.cnn
local doc = cnn.doc or {}

local viz = {}

for _, part in ipairs({ "show", "grid", "hist", "plot", "gradflow", "graph", "png" }) do
  for name, v in pairs(require("viz." .. part)) do viz[name] = v end
end

doc[viz] = [[
viz -- pictures of tensors in the terminal, and PNG files.
viz.show(t), viz.grid(t), viz.hist(t), viz.plot(s1, s2, ...), viz.gradflow(net),
viz.graph(t), viz.save_png(t, path).  Each drawing function prints; its twin
viz.show_str, viz.grid_str, ... returns the text instead.
Colour: 24-bit half blocks (two pixels per character cell) on a terminal;
a grey ramp " ░▒▓█" when NO_COLOR is set or stdout is not a terminal; the
ASCII ramp " .:-=+*#%@" under cnnsh --ascii (cnn.ascii = true).  Options
common to all: {mode = "color"|"grey"|"ascii", width = columns}.]]

return viz
