"""The HTML report: data, renderer, jinja2 templates."""
