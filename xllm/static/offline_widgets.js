(function () {
  "use strict";
  var MIME = "application/vnd.jupyter.widget-", STATE = 'script[type="' + MIME + 'state+json"]', VIEW = 'script[type="' + MIME + 'view+json"]';
  var CSS = ".jupyter-widgets-disconnected::before{content:none!important}"    /* a page has no kernel: no "disconnected" mark on every widget */
          + ".jupyter-widgets i.fa{display:none}"                                /* icons need Font Awesome, which is not in the page */
          + ".xllm-offline-note{color:#777;font:11px sans-serif;margin:2px 0 6px}";
  function widgets() {
    // The bundle is an AMD module for the classic notebook: evaluate it with stand-ins for the notebook modules it asks for
    // (no kernel, no menus), then run its load_ipython_extension, which injects the widgets' CSS and registers nothing else.
    var mod, noop = function () {}, on = { on: noop }, prev = window.requirejs;
    var stubs = { "base/js/namespace": { notebook: { container: on } }, "base/js/events": on,
                  "notebook/js/outputarea": { OutputArea: { prototype: { register_mime_type: noop } } } };
    var define = function (deps, factory) { mod = factory({ config: function () { return {}; } }); };
    define.amd = true;
    var requirejs = function (deps, cb) { if (deps.length === 3 && deps[0] === "base/js/namespace") cb.apply(null, deps.map(function (d) { return stubs[d]; })); };
    requirejs.config = noop;
    window.requirejs = requirejs;
    try {
      (function (define, Jupyter) {
/*BUNDLE*/
      })(define, { version: "6.5.4" });
      mod.load_ipython_extension();
    } finally { if (prev === undefined) delete window.requirejs; else window.requirejs = prev; }
    return mod;   // the exports of @jupyter-widgets/base, /controls and /output
  }
  function Manager(W) { this.W = W; this._models = {}; }   // the part of @jupyter-widgets/base-manager's ManagerBase a static page needs
  Manager.prototype = {
    loadClass: function (name, module) {
      var cls = /^@jupyter-widgets\/(base|controls|output)$/.test(module) ? this.W[name] : undefined;
      return cls ? Promise.resolve(cls) : Promise.reject(new Error(module + " " + name + " is not one of ipywidgets' own widgets"));
    },
    get_model: function (id) { return this._models[id] || Promise.reject(new Error("no saved state for widget " + id)); },
    has_model: function (id) { return this._models[id] !== undefined; },
    callbacks: function () { return {}; },
    setViewOptions: function (o) { return o || {}; },
    resolveUrl: function (u) { return Promise.resolve(u); },
    inline_sanitize: function (s) { var d = document.createElement("div"); d.textContent = s; return d.innerHTML; },
    set_state: function (state) {
      var self = this, W = this.W, all = state.state || {};
      Object.keys(all).forEach(function (id) {   // every model's promise is registered before any is built: children are looked up by id
        var m = all[id], st = m.state || {};
        if (m.buffers && m.buffers.length) W.put_buffers(st, m.buffers.map(function (b) { return b.path; }), m.buffers.map(function (b) {
          var s = atob(b.data), a = new Uint8Array(s.length);
          for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
          return new DataView(a.buffer);
        }));
        self._models[id] = self.loadClass(m.model_name, m.model_module).then(function (Model) {
          return Model._deserialize_state(st, self).then(function (attrs) {
            var model = new Model(attrs, { widget_manager: self, model_id: id });
            model.name = m.model_name; model.module = m.model_module;
            return model;
          });
        });
      });
      return Promise.all(Object.keys(all).map(function (id) { return self._models[id].catch(function (e) { return e; }); }));
    },
    create_view: function (model, options) {
      var self = this, id = this.W.uuid();
      var p = model.state_change = model.state_change.then(function () {
        return self.loadClass(model.get("_view_name"), model.get("_view_module")).then(function (View) {
          var view = new View({ model: model, options: self.setViewOptions(options) });
          view.listenTo(model, "destroy", view.remove);
          return Promise.resolve(view.render()).then(function () {
            view.once("remove", function () { if (model.views) delete model.views[id]; });
            return view;
          });
        });
      });
      if (model.views) model.views[id] = p;
      return p;
    }
  };
  function draw() {
    var states = document.querySelectorAll(STATE);
    if (!states.length) return;   // a live notebook (Jupyter draws the widgets) or a page without saved widgets
    var W = widgets(), style = document.createElement("style");
    style.textContent = CSS; document.head.appendChild(style);
    Array.prototype.forEach.call(states, function (tag) {
      var mgr = new Manager(W), state = JSON.parse(tag.textContent);
      tag.type += ";drawn";   // the page's CDN loader, should it get through, finds nothing left to draw
      mgr.set_state(state).then(function () {
        Array.prototype.forEach.call(document.querySelectorAll(VIEW), function (vt) {
          var id = JSON.parse(vt.textContent).model_id;
          if (!mgr.has_model(id) || !vt.parentElement) return;
          vt.type += ";drawn";
          var host = document.createElement("div"), note = document.createElement("div");
          host.className = "widget-subarea"; note.className = "xllm-offline-note";
          note.textContent = "the widget as the run left it; this page has no kernel behind it, so it does not respond";
          vt.parentElement.insertBefore(host, vt); vt.parentElement.insertBefore(note, vt);
          mgr.get_model(id).then(function (model) { return mgr.create_view(model); })
            .then(function (view) { W.JupyterLuminoWidget.attach(view.luminoWidget, host); })
            .catch(function (e) { host.textContent = "[widget " + id.slice(0, 8) + ": " + e.message + "]"; });
        });
      });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
})();