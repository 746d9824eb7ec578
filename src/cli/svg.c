/* svg.c - plot frames, scales and XML escaping for report.html (see svg.h). */
#include "cli/svg.h"

#include <math.h>
#include <string.h>

void svg_plot_init(svg_plot_t *p, double w, double h, double x0, double x1, double y0,
                   double y1)
{
	*p = (svg_plot_t){ .x0 = x0, .x1 = x1 > x0 ? x1 : x0 + 1, .y0 = y0,
	                   .y1 = y1 > y0 ? y1 : y0 + 1, .w = w, .h = h,
	                   .l = 64, .r = 16, .t = 12, .b = 44 };
}

double svg_nice(double v)
{
	double e, m;

	if (!(v > 0)) return 1;
	e = pow(10, floor(log10(v)));
	m = v / e;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
}

double svg_x(const svg_plot_t *p, double x)
{
	double u = (x - p->x0) / (p->x1 - p->x0);
	u = u < 0 ? 0 : u > 1 ? 1 : u;
	return p->l + u * (p->w - p->l - p->r);
}

double svg_y(const svg_plot_t *p, double y)
{
	double u = p->ylog ? (log10(y > p->y0 ? y : p->y0) - log10(p->y0)) / log10(p->y1 / p->y0)
	                   : (y - p->y0) / (p->y1 - p->y0);
	u = u < 0 ? 0 : u > 1 ? 1 : u;
	return p->h - p->b - u * (p->h - p->t - p->b);
}

void svg_esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

void svg_esc_url(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (c && strchr("-._~", c)))
			fputc(c, f);
		else
			fprintf(f, "%%%02X", c);
	}
}

/* ticks at multiples of a round step, about five over [a, b] */
static double svg_step(double a, double b)
{
	return svg_nice((b - a) / 5);
}

void svg_plot_open(FILE *f, const svg_plot_t *p, const char *id, const char *xlabel,
                   const char *ylabel)
{
	double sx = svg_step(p->x0, p->x1), sy = svg_step(p->y0, p->y1);
	double bx = p->h - p->b, ly = p->l;

	fprintf(f, "<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
	        "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", id, p->w, p->h, p->w,
	        p->h);
	fprintf(f, "<g class=\"axis\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
	        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", ly, bx, p->w - p->r, bx,
	        ly, bx, ly, p->t);
	for (double v = ceil(p->x0 / sx) * sx; !p->no_xticks && v <= p->x1 + 1e-9 * sx; v += sx)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", svg_x(p, v), bx,
		        svg_x(p, v), bx + 4, svg_x(p, v), bx + 16, v);
	if (p->ylog) sy = 10;   /* a factor */
	for (double v = p->ylog ? pow(10, ceil(log10(p->y0) - 1e-9)) : ceil(p->y0 / sy) * sy;
	     !p->no_yticks && v <= p->y1 * (1 + 1e-9) + 1e-9 * sy; v = p->ylog ? v * sy : v + sy)
		fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ly, svg_y(p, v),
		        p->w - p->r, svg_y(p, v), ly - 6, svg_y(p, v) + 4, v);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (ly + p->w - p->r) / 2,
	        p->h - 8);
	svg_esc(f, xlabel);
	fprintf(f, "</text><text transform=\"translate(14 %.1f) rotate(-90)\" "
	        "text-anchor=\"middle\">", (p->t + bx) / 2);
	svg_esc(f, ylabel);
	fputs("</text></g>\n", f);
}

void svg_close(FILE *f)
{
	fputs("</svg>\n", f);
}
