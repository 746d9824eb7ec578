/* svg.h (prefix svg_) - the inline SVG charts of report.html: a plot's
 * frame (axes, round ticks, labels), its data-to-pixel scales, and text
 * escaped for XML, a file name for a URL.  Writes to a caller's FILE; keeps nothing. */
#ifndef ESMBATCH_CLI_SVG_H
#define ESMBATCH_CLI_SVG_H

#include <stdio.h>

/* a plot: the data range shown, the picture's size and margins (px);
 * set the flags after svg_plot_init */
typedef struct {
	double x0, x1, y0, y1;
	double w, h;
	double l, r, t, b;
	int    ylog;                 /* y on a log scale (y0 > 0): ticks at powers of 10 */
	int    no_xticks, no_yticks; /* an axis of categories: the caller labels it */
} svg_plot_t;

/* p = a w x h picture of [x0, x1] x [y0, y1] with room for the axes */
void   svg_plot_init(svg_plot_t *p, double w, double h, double x0, double x1, double y0,
                     double y1);
/* <svg id="ID" ...>, its axes with ticks and the axis labels; svg_close
 * ends it */
void   svg_plot_open(FILE *f, const svg_plot_t *p, const char *id, const char *xlabel,
                     const char *ylabel);
void   svg_close(FILE *f);
/* pixel position of a data value (clamped to the plot's range) */
double svg_x(const svg_plot_t *p, double x);
double svg_y(const svg_plot_t *p, double y);
/* the smallest 1, 2 or 5 x 10^k at least v (1 for v <= 0) */
double svg_nice(double v);
/* s with & < > " ' escaped, for text and attribute values */
void   svg_esc(FILE *f, const char *s);
/* the n bytes of s as one URL path segment: every byte but A-Z a-z 0-9
 * - . _ ~ percent-encoded (so also safe in an attribute value) */
void   svg_esc_url(FILE *f, const char *s, size_t n);

#endif
